"""insufficient (paper App. B): the fixed answer when no passage survived alignment."""

from __future__ import annotations

from langgraph.runtime import Runtime

from evident.context import EvidentContext
from evident.models import INSUFFICIENT_ANSWER
from evident.state import DraftUpdate, EvidentState


def insufficient(state: EvidentState, runtime: Runtime[EvidentContext]) -> DraftUpdate:
    return {"draft": INSUFFICIENT_ANSWER, "citations": []}
