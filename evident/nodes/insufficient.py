"""insufficient (paper App. B): the fixed answer when no passage survived alignment."""

from __future__ import annotations

from typing import Any

from evident.models import INSUFFICIENT_ANSWER
from evident.state import EvidentState


def insufficient(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    return {"draft": INSUFFICIENT_ANSWER, "citations": []}
