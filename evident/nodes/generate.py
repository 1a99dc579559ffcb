"""generate (paper §3.4): the answer, written from verified passages only, a [url] per sentence."""

from __future__ import annotations

from typing import Any

from evident.nodes.common import timed
from evident.offline.composer import compose_answer
from evident.state import EvidentState


def generate(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    update: dict[str, Any] = {}
    with timed("generate", update):
        update["draft"] = compose_answer(state["query"], state.get("verified") or [])
    return update
