"""align (paper §3.3): verify every passage against the retrieved text of its cited document."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from evident.alignment import align as align_passages
from evident.alignment.aligner import drop_non_evidence
from evident.alignment.models import Passage, SourceDocument
from evident.alignment.outline import document_path
from evident.context import EvidentContext
from evident.nodes.common import timed
from evident.nodes.names import ALIGN, GENERATE, INSUFFICIENT
from evident.request_settings import run_settings
from evident.state import AlignUpdate, EvidentState, read


def align(state: EvidentState, runtime: Runtime[EvidentContext]) -> AlignUpdate:
    ctx = run_settings(runtime)
    update: AlignUpdate = {}
    with timed(ALIGN, update):
        retrieved = read(SourceDocument, state.get("documents"))
        decisions = align_passages(
            read(Passage, state.get("passages")), retrieved,
            n=ctx.ngram_n, threshold=ctx.threshold, drift=ctx.drift, bridge=ctx.bridge,
        )
        # A verified heading or fragment is the document's text but supports nothing (evidence.py).
        decisions = [drop_non_evidence(d, ctx.min_evidence_tokens) for d in decisions]
        # Each verified passage keeps what it is about: the headings its quote sits under.
        documents = {d.url: d for d in retrieved}
        decisions = [
            d.model_copy(update={"heading_path": document_path(documents[d.url], d.spans)})
            if d.action != "dropped" and d.url in documents else d
            for d in decisions
        ]
        update["alignment"] = decisions
        update["verified"] = [d for d in decisions if d.action != "dropped"]
    return update


def route_after_align(state: EvidentState) -> Literal["generate", "insufficient"]:
    """The short-circuit of DESIGN §2: no verified passage, no generation."""
    return GENERATE if state.get("verified") else INSUFFICIENT
