"""The shared state the graph's nodes read and update.

`typing_extensions.TypedDict` on purpose: the LangGraph server builds the assistant's JSON schema
from these types, and `typing.TypedDict` on Python 3.11 makes that endpoint fail.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, TypeVar, cast

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from pydantic import BaseModel
from typing_extensions import TypedDict

from evident.context import Mode
from evident.models import (
    AlignmentDecision,
    BatchExtraction,
    Citation,
    Conversation,
    Evidence,
    Line,
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
_M = TypeVar("_M", bound=BaseModel)
GeneratedBy = Literal["model", "offline"]  # which measure `verify` applies to the draft
Unset = Literal[""]  # a per-query field before the step that writes it (a query's start empties it)
# A model as the state holds it: its JSON form, `model_dump(mode="json")`, with the model's field names.
Json = dict[str, Any]


# -- the state holds JSON ---------------------------------------------------------------------------
# Locally, through `RemoteGraph` and through the SDK, a query's values have one shape: JSON (what
# `json.dumps` accepts). Nodes write pydantic models (`as_json` turns their update into JSON on the
# way out, evident/graph/instrument.py) and read them back validated (`read`), so every node boundary
# still checks its models; checkpoints hold plain JSON, never a class to import.


def as_json(value: Any) -> Any:
    """`value` with every pydantic model in it (inside lists, tuples, dicts and `Overwrite`) as its JSON form."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Overwrite):
        return Overwrite(as_json(value.value))
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def update_as_json(update: Mapping[str, Any]) -> dict[str, Any]:
    """A node's update as the state stores it: JSON, but `messages` keep their message objects (LangGraph's
    `stream_mode="messages"` streams the ones a node writes; the `messages` reducer stores them as JSON)."""
    return {key: value if key == "messages" else as_json(value) for key, value in update.items()}


def read(model: type[_M], items: Iterable[Any] | None) -> list[_M]:
    """The items of a state value, validated as `model` (JSON or models: both are accepted), or of a node's
    update, where `rewrite` replaces an accumulating value (`Overwrite`, `start_of_query`)."""
    if isinstance(items, Overwrite):
        items = items.value
    return [model.model_validate(item) for item in items or []]


def message_json(message: BaseMessage) -> Json:
    """A message as the state stores it: `model_dump(mode="json")`, as the LangGraph server sends it,
    less the empty AI fields that `add_messages` would otherwise read back into `additional_kwargs`."""
    out: Json = message.model_dump(mode="json")
    if out.get("invalid_tool_calls") == []:
        del out["invalid_tool_calls"]
    if "usage_metadata" in out and out["usage_metadata"] is None:
        del out["usage_metadata"]
    return out


def add_messages_as_json(left: Any, right: Any) -> list[Json]:
    """The `messages` reducer: LangGraph's `add_messages` (append, replace by id, `RemoveMessage`), each
    message then stored as its JSON dict. A parent graph's `add_messages` reads them back as messages."""
    merged = cast(list[BaseMessage], add_messages(left or [], right or []))  # add_messages returns messages
    return [message_json(m) for m in merged]


def merge_extractions(left: list[_T] | None, right: list[_T] | None) -> list[_T]:
    """State reducer: batches append; `None` empties the list (the merge step consumes it, so a
    checkpointed thread's next query starts clean)."""
    if right is None:
        return []
    return [*(left or []), *right]

def per_query(left: list[_T] | None, right: list[_T] | None) -> list[_T]:
    """State reducer: the items of the query's steps add up (`rewrite`, which starts a query, starts afresh
    with `Overwrite`)."""
    return [*(left or []), *(right or [])]


def merge_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    return {**(left or {}), **(right or {})}


# The conversation. Typed as messages (what LangGraph Studio needs to offer its chat view); stored as their
# JSON dicts (`add_messages_as_json`); the conversation's readers take either (conversation.messages.read_messages).
Messages = Annotated[list[AnyMessage], add_messages_as_json]


class InputState(TypedDict, total=False):
    """What a caller passes: a question (`query`) or a conversation (`messages`, the last one the
    user's), and, optionally, who is asking."""

    query: NotRequired[str]
    messages: NotRequired[Messages]
    principal: NotRequired[Principal | dict[str, Any] | None]


class Outcome(TypedDict, total=False):
    """How a query ended: its answer, its citations, its status and how well the documentation backs the
    answer (a query's start empties them)."""

    generated_by: GeneratedBy | Unset
    removed_sentences: list[str]
    answer: str
    citations: list[Json]  # Citation
    status: Status | Unset
    evidence: Evidence | Unset  # clear | weak (a hedged answer) | none (no answer): evident.models.Evidence
    error: str


class OutputState(Outcome, total=False):
    """What a query returns (the graph's output schema): the answer, its citations and the evidence
    trail. Every key is there once the query ends (`rewrite` writes them all, `postprocess` the answer).
    Every value is JSON: a model as `model_dump(mode="json")` (the model named beside it validates it back),
    a message as its JSON dict, the same locally and from a server."""

    query: Required[str]  # the question this query answers (a follow-up's standalone form)
    # The conversation: kept on a thread, never reset; each query appends its answer (evident/conversation).
    messages: Messages
    # Written by `rewrite` at every query, so never left over from an earlier one.
    standalone_query: str
    rewrite: Json | None  # Rewrite
    mode: Mode | Unset
    documents: list[Json]  # SourceDocument
    retrieved: list[Json]  # RetrievedRef
    source_errors: list[Json]  # SourceError; `retrieve` alone writes them
    source_runs: list[Json]  # SourceRun; per source: status, documents kept, latency (hidden ones: traces only)
    model_errors: Annotated[list[Json], per_query]  # SourceError
    notes: list[str]  # what the run ignored in its request (e.g. a body principal on the server)
    passages: list[Json]  # Passage
    extractions: Annotated[list[Json], merge_extractions]  # BatchExtraction; LLM extraction batches
    extraction_notes: list[str]  # per extraction call: the request shape used, how its reply was read
    alignment: list[Json]  # AlignmentDecision
    verified: list[Json]  # AlignmentDecision
    timings_ms: Annotated[dict[str, float], merge_timings]


class EvidentState(OutputState, total=False):
    """The shared state the nodes read: what a query returns, who asked, and the unchecked draft."""

    principal: Principal | dict[str, Any] | None
    # What `rewrite`, the first step, settled for the whole query (evident/nodes/prepare.py): who is asking (the
    # principal `retrieve` searches as; on the server the authenticated user) and what the conversation holds.
    caller: Json | None  # Principal
    conversation: Json  # Conversation
    # The answer from `generate` to `postprocess`: its lines of cited sentences, which `verify` checks and
    # `postprocess` renders as the answer's text.
    draft: list[Json]  # Line
    # The offline extractor's evidence was admitted by a narrow margin (`extractor.Extraction.weak`): the
    # offline answer says first that the documentation does not state it explicitly. `extract` writes it.
    weak_evidence: bool


# -- what each step writes (a partial update of the state) ---------------------------------------------


class Timed(TypedDict, total=False):
    # The step's own time, under its name; `rewrite` replaces the previous query's times (`Overwrite`).
    timings_ms: dict[str, float] | Overwrite


class RewriteUpdate(Timed, total=False):
    query: str
    standalone_query: str
    rewrite: Rewrite
    messages: Sequence[BaseMessage]  # removals of a refused conversation's messages
    conversation: Conversation
    caller: Principal | None


class ExtractBatch(TypedDict):
    """The `Send` payload of one `extract_batch` task: the documents of one extraction call."""

    query: str
    batch: int
    of: int
    documents: list[Json]  # SourceDocument (a task's input is checkpointed too: JSON, as the state)


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


class RetrieveUpdate(Timed, total=False):
    documents: list[SourceDocument]
    retrieved: list[RetrievedRef]
    source_errors: list[SourceError]
    source_runs: list[SourceRun]
    notes: list[str]
    status: Status | Unset
    error: str


class QueryStart(RewriteUpdate, RetrieveUpdate, AlignUpdate, Outcome, total=False):
    """`rewrite`, the step that starts a query: every per-query field, emptied unless it set it."""

    mode: Mode | Unset
    passages: list[Passage]
    extractions: list[BatchExtraction] | None
    extraction_notes: list[str]
    model_errors: list[SourceError] | Overwrite
    principal: Principal | dict[str, Any] | None
    draft: list[Line]
    weak_evidence: bool


class DraftUpdate(Timed, total=False):
    """`insufficient`, `generate` and `verify`: the draft answer and how it was written."""

    draft: list[Line]
    citations: list[Citation]
    generated_by: GeneratedBy
    removed_sentences: list[str]
    model_errors: list[SourceError]


class PostprocessUpdate(Timed, total=False):
    answer: str
    citations: list[Citation]
    status: Status
    evidence: Evidence
    messages: Sequence[BaseMessage]  # the answer, and removals when the thread reaches its limits


# Every field a query writes, with its empty value: a thread's next query starts from these.
# Not here: `query`, `standalone_query` and `rewrite` (the `rewrite` step writes them at every query), and
# `messages` (the thread's conversation, which outlives its queries).
PER_QUERY: QueryStart = {
    "mode": "", "caller": None, "conversation": Conversation(), "documents": [], "retrieved": [],
    "source_errors": [], "source_runs": [], "model_errors": [], "notes": [], "passages": [], "extractions": [],
    "extraction_notes": [], "alignment": [], "verified": [], "draft": [], "weak_evidence": False,
    "generated_by": "", "removed_sentences": [], "answer": "", "citations": [], "status": "", "evidence": "",
    "error": "",
    "timings_ms": {},
}


def start_of_query(update: QueryStart) -> QueryStart:
    """`rewrite`'s `update`, completed so that nothing of a previous query on the same thread
    (a checkpointed thread, a server's thread) survives: every per-query field not in `update` is
    emptied, and the accumulating ones (`model_errors`, `timings_ms`) are replaced (`Overwrite`), not
    appended to."""
    out: QueryStart = {**copy.deepcopy(PER_QUERY), **update}
    out["model_errors"] = Overwrite(out.get("model_errors") or [])
    out["extractions"] = None  # merge_extractions empties the list on None
    out["timings_ms"] = Overwrite(out.get("timings_ms") or {})
    return out
