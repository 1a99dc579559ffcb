"""align (paper §3.3): verify every passage against the retrieved text of its cited document."""

from __future__ import annotations

from typing import Any

from evident.alignment import align as align_passages
from evident.alignment.evidence import drop_non_evidence
from evident.nodes.common import settings, timed
from evident.state import EvidentState


def align(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    ctx = settings(runtime)
    update: dict[str, Any] = {}
    with timed("align", update):
        decisions = align_passages(
            state.get("passages") or [], state.get("documents") or [],
            n=ctx.ngram_n, threshold=ctx.threshold, drift=ctx.drift, bridge=ctx.bridge,
        )
        # A verified heading or fragment is the document's text but supports nothing (evidence.py).
        decisions = [drop_non_evidence(d, ctx.min_evidence_tokens) for d in decisions]
        update["alignment"] = decisions
        update["verified"] = [d for d in decisions if d.action != "dropped"]
    return update


def route_after_align(state: EvidentState) -> str:
    """The short-circuit of DESIGN §2: no verified passage, no generation."""
    return "generate" if state.get("verified") else "insufficient"
