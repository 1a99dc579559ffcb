"""insufficient (paper App. B): the fixed answer when no passage survived alignment."""

from __future__ import annotations

from evident.models import INSUFFICIENT_ANSWER
from evident.nodes.common import NodeRuntime
from evident.state import DraftUpdate, EvidentState


def insufficient(state: EvidentState, runtime: NodeRuntime = None) -> DraftUpdate:
    return {"draft": INSUFFICIENT_ANSWER, "citations": []}
