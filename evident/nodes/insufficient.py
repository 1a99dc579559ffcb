"""insufficient (paper App. B): the fixed answer when no passage survived alignment."""

from __future__ import annotations

from langgraph.runtime import Runtime

from evident.context import EvidentContext
from evident.models import INSUFFICIENT_ANSWER, Line, Sentence
from evident.state import DraftUpdate, EvidentState


def insufficient(state: EvidentState, runtime: Runtime[EvidentContext]) -> DraftUpdate:
    return {"draft": [Line(sentences=[Sentence(text=INSUFFICIENT_ANSWER)])], "citations": []}
