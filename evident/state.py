"""The shared state the graph's nodes read and update.

`typing_extensions.TypedDict` on purpose: the LangGraph server builds the assistant's JSON schema
from these types, and `typing.TypedDict` on Python 3.11 makes that endpoint fail.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, TypeVar

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from evident.context import Mode
from evident.models import (
    AlignmentDecision,
    BatchExtraction,
    Citation,
    Passage,
    Principal,
    RetrievedRef,
    Rewrite,
    SourceDocument,
    SourceError,
    SourceRun,
    Status,
)

_T = TypeVar("_T")
GeneratedBy = Literal["model", "offline"]  # which measure `verify` applies to the draft
Unset = Literal[""]  # a per-query field before the step that writes it (a query's start empties it)



def merge_extractions(left: list[BatchExtraction] | None, right: list[BatchExtraction] | None) -> list[BatchExtraction]:
    """State reducer: batches append; `None` empties the list (the merge step consumes it, so a
    checkpointed thread's next query starts clean)."""
    if right is None:
        return []
    return [*(left or []), *right]

def per_query(left: list[_T] | None, right: list[_T] | None) -> list[_T]:
    """State reducer: the items of the query's steps add up (its first step starts afresh with `Overwrite`)."""
    return [*(left or []), *(right or [])]


def merge_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    return {**(left or {}), **(right or {})}


class InputState(TypedDict, total=False):
    """What a caller passes: a question (`query`) or a conversation (`messages`, the last one the
    user's), and, optionally, who is asking."""

    query: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    principal: NotRequired[Principal | dict[str, Any] | None]


class Outcome(TypedDict, total=False):
    """How a query ended: its answer, its citations and its status (a query's start empties them)."""

    generated_by: GeneratedBy | Unset
    removed_sentences: list[str]
    answer: str
    citations: list[Citation]
    status: Status | Unset
    error: str


class OutputState(Outcome, total=False):
    """What a query returns (the graph's output schema): the answer, its citations and the evidence
    trail. Every key is there once the query ends (`retrieve` writes them all, `postprocess` the answer)."""

    query: Required[str]  # the question this query answers (a follow-up's standalone form)
    # The conversation: kept on a thread, never reset; each query appends its answer (evident/conversation).
    messages: Annotated[list[AnyMessage], add_messages]
    # Written by `rewrite` at every query, so never left over from an earlier one.
    standalone_query: str
    rewrite: Rewrite | None
    mode: Mode | Unset
    documents: list[SourceDocument]
    retrieved: list[RetrievedRef]
    source_errors: list[SourceError]  # `retrieve` alone writes them
    source_runs: list[SourceRun]  # per source: status, documents kept, latency (hidden ones: traces only)
    model_errors: Annotated[list[SourceError], per_query]
    notes: list[str]  # what the run ignored in its request (e.g. a body principal on the server)
    passages: list[Passage]
    extractions: Annotated[list[BatchExtraction], merge_extractions]  # LLM extraction batches
    extraction_notes: list[str]  # per extraction call: the request shape used, how its reply was read
    alignment: list[AlignmentDecision]
    verified: list[AlignmentDecision]
    timings_ms: Annotated[dict[str, float], merge_timings]


class EvidentState(OutputState, total=False):
    """The shared state the nodes read: what a query returns, who asked, and the unchecked draft."""

    principal: Principal | dict[str, Any] | None
    draft: str  # the answer before `verify` checked it
    # The offline extractor's evidence was admitted by a narrow margin (`extractor.Extraction.weak`): the
    # offline answer says first that the documentation does not state it explicitly. `extract` writes it.
    weak_evidence: bool


# -- what each step writes (a partial update of the state) ---------------------------------------------


class Timed(TypedDict, total=False):
    # The step's own time, under its name; a query's first step replaces the previous query's (`Overwrite`).
    timings_ms: dict[str, float] | Overwrite


class RewriteUpdate(Timed, total=False):
    query: str
    standalone_query: str
    rewrite: Rewrite
    messages: Sequence[BaseMessage]  # removals of a refused conversation's messages


class ExtractBatch(TypedDict):
    """The `Send` payload of one `extract_batch` task: the documents of one extraction call."""

    query: str
    batch: int
    of: int
    documents: list[SourceDocument]


class ExtractUpdate(Timed, total=False):
    """`extract_batch` (its batch's `extractions`) and `extract` (the merged `passages`)."""

    mode: Mode
    passages: list[Passage]
    weak_evidence: bool
    extractions: list[BatchExtraction] | None  # None empties the channel (merge_extractions)
    extraction_notes: list[str]
    model_errors: list[SourceError]


class AlignUpdate(Timed, total=False):
    alignment: list[AlignmentDecision]
    verified: list[AlignmentDecision]


class QueryStart(AlignUpdate, Outcome, total=False):
    """`retrieve`, the first step of a query: every per-query field, emptied unless it set it."""

    mode: Mode | Unset
    passages: list[Passage]
    extractions: list[BatchExtraction] | None
    extraction_notes: list[str]
    model_errors: list[SourceError] | Overwrite
    principal: Principal | dict[str, Any] | None
    documents: list[SourceDocument]
    retrieved: list[RetrievedRef]
    source_errors: list[SourceError]
    source_runs: list[SourceRun]
    notes: list[str]
    draft: str
    weak_evidence: bool


class DraftUpdate(Timed, total=False):
    """`insufficient`, `generate` and `verify`: the draft answer and how it was written."""

    draft: str
    citations: list[Citation]
    generated_by: GeneratedBy
    removed_sentences: list[str]
    model_errors: list[SourceError]


class PostprocessUpdate(Timed, total=False):
    answer: str
    citations: list[Citation]
    status: Status
    messages: Sequence[BaseMessage]  # the answer, and removals when the thread reaches its limits


# Every field a query writes, with its empty value: a thread's next query starts from these.
# Not here: `query`, `standalone_query` and `rewrite` (the `rewrite` step writes them at every query, before
# this reset), and `messages` (the thread's conversation, which outlives its queries).
PER_QUERY: QueryStart = {
    "mode": "", "documents": [], "retrieved": [], "source_errors": [], "source_runs": [], "model_errors": [],
    "notes": [], "passages": [], "extractions": [], "extraction_notes": [], "alignment": [], "verified": [],
    "draft": "", "weak_evidence": False,
    "generated_by": "", "removed_sentences": [], "answer": "", "citations": [], "status": "", "error": "",
    "timings_ms": {},
}


def start_of_query(update: QueryStart) -> QueryStart:
    """The first node's `update`, completed so that nothing of a previous query on the same thread
    (a checkpointed thread, a server's thread) survives: every per-query field not in `update` is
    emptied, and the accumulating ones (`model_errors`, `timings_ms`) are replaced (`Overwrite`), not
    appended to."""
    out: QueryStart = {**copy.deepcopy(PER_QUERY), **update}
    out["model_errors"] = Overwrite(out.get("model_errors") or [])
    out["extractions"] = None  # merge_extractions empties the list on None
    out["timings_ms"] = Overwrite(out.get("timings_ms") or {})
    return out
