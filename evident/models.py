"""Models that cross node and API boundaries (besides the alignment ones they re-export)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from evident.alignment.models import AlignmentDecision, Passage, SourceDocument

Status = Literal["answered", "insufficient", "degraded", "error"]
# How well the documentation backs an answer, for machines (the answer's text says it to people):
# `clear`: its sentences state the answer; `weak`: it opens with "The documentation does not explicitly
# state …" and shows the passages that come closest (a hedge: they may not answer the question); `none`:
# there is no answer (status `insufficient` or `error`).
Evidence = Literal["clear", "weak", "none"]
INSUFFICIENT_ANSWER = "Not sufficient information to answer."


class Principal(BaseModel):
    """Who is asking: used to filter documents by their ACL before anything else sees them."""

    user: str = ""
    groups: list[str] = Field(default_factory=list)
    ids: dict[str, str] = Field(
        default_factory=dict,
        description="The user's id in a source system, by source name (e.g. a Confluence accountId); "
        "`user` is used where none is given.",
    )


class SourceError(BaseModel):
    """A source (or model step) that failed or timed out; the query goes on without it."""

    source: str
    kind: Literal["timeout", "error", "config", "model"] = "error"
    message: str


class SourceRun(BaseModel):
    """How one source answered one query: counts and timing only, never titles or text."""

    source: str
    status: Literal["ok", "empty", "error", "timeout", "config"]
    documents: int = Field(0, description="documents kept from this source after permission filtering")
    denied: int = Field(0, description="documents dropped because the caller may not see them")
    latency_ms: float = 0.0
    hidden: list[str] = Field(default_factory=list,
                              description="why the whole source was hidden from this caller (names no document)")


class RetrievedRef(BaseModel):
    url: str
    title: str = ""
    source: str = ""


class Citation(BaseModel):
    """One answer sentence tied to one cited document and the exact spans that support it."""

    sentence: str
    url: str
    passage_ids: list[str] = Field(default_factory=list)
    spans: list[tuple[int, int]] = Field(default_factory=list)
    quote: str = ""
    heading_path: list[str] = Field(
        default_factory=list, description="the document's title and the headings (a definition's term "
        "last) the quote sits under, outermost first; context for the quote, never part of it")
    span_base: Literal["document", "chunk"] = Field(
        "document", description="what `spans` are offsets into: the document's text, or only the retrieved "
        "chunk's (a chunked retriever that gave neither the chunk's start_index nor the whole document)")
    content_hash: str = Field("", description="hash of the source text `spans` index (SourceDocument.content_hash); "
                              "'' when that text was not retrieved whole (a chunk cited at document offsets)")
    revision: str = Field("", description="the source's own revision of that text, `kind=value` (revid=…, "
                          "mtime_ns=…;size=…, etag=…, last-modified=…); '' when the source has none")


class Rewrite(BaseModel):
    """How the last message of a conversation became the question the query answers (evident/conversation)."""

    asked: str = Field("", description="the user's last message, as written")
    standalone_query: str = Field("", description="the question retrieval, extraction and generation use")
    rewritten_by: Literal["none", "rule", "model"] = Field(
        "none", description="none: asked as a standalone question; rule: the offline rule; model: the chat model"
    )
    turns: int = Field(0, description="earlier user turns of the conversation")
    problem: str = Field("", description="why the request's messages were refused ('' when they were not)")
    model_error: SourceError | None = Field(None, description="the rewrite call's failure (the rule was used)")



Role = Literal["user", "assistant"]


class Turn(BaseModel):
    """One message of a conversation. `standalone` is, for an answer, the question it answered (the
    graph records it on its answers; a client's own assistant messages have none)."""

    role: Role
    content: str
    standalone: str | None = None


class Conversation(BaseModel):
    """What a query's `rewrite` step read of its conversation, once, for the steps after it."""

    history: list[Turn] = Field(default_factory=list, description="the turns before the question; none for a "
                                "`query` input, which stands alone")
    said: list[str] = Field(default_factory=list, description="the text of the conversation's last answers: "
                            "what was already said, which an answer need not repeat")


class Sentence(BaseModel):
    """One sentence of an answer (the paper's fact unit, §6.2: the text before a citation group), the ids of
    the documents it cites, and whether `verify` flagged it as unsupported (`unsupported = "flag"`)."""

    text: str
    urls: list[str] = Field(default_factory=list)
    flagged: bool = False


class Line(BaseModel):
    """One line of an answer: its list marker (`prefix`, '' for prose) and its sentences; a line without
    sentences and without a marker is a paragraph break. The draft answer is a list of them from `generate`
    to `postprocess`, which renders it as text once (evident/citations/answer.py)."""

    prefix: str = ""
    sentences: list[Sentence] = Field(default_factory=list)


__all__ = [
    "INSUFFICIENT_ANSWER", "AlignmentDecision", "Citation", "Conversation", "Evidence", "Line", "Passage",
    "Principal", "RetrievedRef", "Rewrite", "Role", "Sentence", "SourceDocument", "SourceError", "SourceRun",
    "Status", "Turn",
]


class BatchExtraction(BaseModel):
    """The outcome of one parallel extraction call (one LangGraph `Send`)."""

    batch: int
    of: int
    documents: list[SourceDocument] = Field(description="the documents (or parts) this call read")
    passages: list[Passage] = Field(default_factory=list)
    failed: bool = False
    note: str = ""
    rung: str = Field("", description="the request shape whose reply was read: json_schema, function_calling, "
                      "json_mode or text")
    tokens: dict[str, int] | None = Field(None, description="the model tokens of this call, as the model reported "
                                          "them: {calls, input_tokens, output_tokens, total_tokens}")
