"""The shared state the graph's nodes read and update.

`typing_extensions.TypedDict` on purpose: the LangGraph server builds the assistant's JSON schema
from these types, and `typing.TypedDict` on Python 3.11 makes that endpoint fail.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, Required, TypedDict

from evident.llm.replies import BatchExtraction, merge_extractions
from evident.models import (
    AlignmentDecision,
    Citation,
    Passage,
    Principal,
    RetrievedRef,
    Rewrite,
    SourceDocument,
    SourceError,
    SourceRun,
)


class _Fresh(list):  # type: ignore[type-arg]
    """A list that replaces what its channel holds instead of being appended to (a query's start).
    A plain list to everything else: stream consumers and JSON see the values, not a wrapper."""


class _FreshTimings(dict):  # type: ignore[type-arg]
    """The timings of a query's first step: they replace the previous query's."""


def per_query(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    """State reducer: the items of the query's steps add up; the query's first step starts afresh."""
    if isinstance(right, _Fresh):
        return list(right)
    return [*(left or []), *(right or [])]


def merge_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    if isinstance(right, _FreshTimings):
        return dict(right)
    return {**(left or {}), **(right or {})}


class InputState(TypedDict, total=False):
    """What a caller passes: a question (`query`) or a conversation (`messages`, the last one the
    user's), and, optionally, who is asking."""

    query: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    principal: NotRequired[Principal | dict[str, Any] | None]


class EvidentState(TypedDict, total=False):
    query: Required[str]  # the question this query answers (a follow-up's standalone form)
    # The conversation: kept on a thread, never reset; each query appends its answer (evident/conversation).
    messages: Annotated[list[AnyMessage], add_messages]
    # Written by `rewrite` at every query, so never left over from an earlier one.
    standalone_query: str
    rewrite: Rewrite | None
    principal: Principal | dict[str, Any] | None
    mode: str
    documents: list[SourceDocument]
    retrieved: list[RetrievedRef]
    source_errors: Annotated[list[SourceError], per_query]
    source_runs: list[SourceRun]  # per source: status, documents kept, latency (hidden ones: traces only)
    model_errors: Annotated[list[SourceError], per_query]
    notes: list[str]  # what the run ignored in its request (e.g. a body principal on the server)
    passages: list[Passage]
    extractions: Annotated[list[BatchExtraction], merge_extractions]  # LLM extraction batches
    extraction_notes: list[str]  # per extraction call: the request shape used, how its reply was read
    alignment: list[AlignmentDecision]
    verified: list[AlignmentDecision]
    draft: str
    generated_by: str  # "model" or "offline": which measure verify applies to the draft
    removed_sentences: list[str]
    answer: str
    citations: list[Citation]
    status: str
    error: str
    timings_ms: Annotated[dict[str, float], merge_timings]


# Every field a query writes, with its empty value: a thread's next query starts from these.
# Not here: `query`, `standalone_query` and `rewrite` (the `rewrite` step writes them at every query, before
# this reset), and `messages` (the thread's conversation, which outlives its queries).
_PER_QUERY: dict[str, Any] = {
    "mode": "", "documents": [], "retrieved": [], "source_errors": [], "source_runs": [], "model_errors": [],
    "notes": [], "passages": [], "extractions": [], "extraction_notes": [], "alignment": [], "verified": [],
    "draft": "",
    "generated_by": "", "removed_sentences": [], "answer": "", "citations": [], "status": "", "error": "",
    "timings_ms": {},
}


def start_of_query(update: dict[str, Any]) -> dict[str, Any]:
    """The first node's `update`, completed so that nothing of a previous query on the same thread
    (a checkpointed thread, a server's thread) survives: every per-query field not in `update` is
    emptied, and the accumulating ones (`source_errors`, `model_errors`, ...) are replaced, not
    appended to."""
    out = {**copy.deepcopy(_PER_QUERY), **update}
    out["source_errors"] = _Fresh(out["source_errors"])
    out["model_errors"] = _Fresh(out["model_errors"])
    out["extractions"] = None  # merge_extractions empties the list on None
    out["timings_ms"] = _FreshTimings(out["timings_ms"])
    return out
