"""verify (beyond the paper): every answer sentence must be supported by a passage it cites."""

from __future__ import annotations

from typing import Any

from evident.answer import check_answer, parse_answer, render_answer
from evident.nodes.common import settings, timed
from evident.state import EvidentState


def verify(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    ctx = settings(runtime)
    update: dict[str, Any] = {}
    with timed("verify", update):
        lines, removed = check_answer(
            parse_answer(state.get("draft") or ""), state.get("verified") or [],
            n=ctx.ngram_n, threshold=ctx.threshold, unsupported=ctx.unsupported,
        )
        update["draft"] = render_answer(lines)
        update["removed_sentences"] = removed
    return update
