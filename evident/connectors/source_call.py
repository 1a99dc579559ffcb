"""Calling one source: untraced, under its deadline, its answer turned into visible documents.

Sources run with tracing off because their raw answers may hold documents the caller may not see;
errors become `SourceError`s with any credential redacted. A source that filters inside its search
(`FiltersInSearch`) is asked once; any other one is asked for larger pages while the ACL filter leaves
it short (`evident.connectors.refill`).
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, NamedTuple

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langsmith import tracing_context
from pydantic import ValidationError

from evident.connectors.acl import filter_documents
from evident.connectors.base import NoDocumentId, to_source_document
from evident.connectors.chunks import as_chunks
from evident.connectors.index.corpus import LOCAL_SOURCE
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.refill import REFILL_ROUNDS, larger_page, page_size
from evident.connectors.remote.http import one_line
from evident.connectors.source import (
    AccessOptions,
    AccessReport,
    FailureKind,
    Source,
    SourceConfigError,
    SourceFailure,
    accepts_principal,
    filters_in_search,
    ranks_by_meaning,
)
from evident.embeddings.meaning import QueryMeaning, without_meaning
from evident.models import Principal, SourceDocument, SourceError


class SourceAnswer(NamedTuple):
    """What a source returned (not yet checked), how many hits its own permission check hid, how long it took."""

    raw: Any
    denied: int
    latency_ms: float
    hidden: tuple[str, ...] = ()  # the report's reasons: why the whole source was hidden from the caller
    short: bool = False  # still short of k visible documents after the refill rounds (`shortfall_error`)


class SourceCallError(Exception):
    """A source call that failed, and how long it ran; `cause` is None when it missed its deadline."""

    def __init__(self, cause: Exception | None, latency_ms: float) -> None:
        self.cause = cause
        self.latency_ms = latency_ms
        super().__init__(str(cause) if cause is not None else "deadline")


class _UntracedCall:
    """Around one call of a source: tracing off, the keywords it gets, its clock and the report it fills;
    a failure leaves as a `SourceCallError` carrying its latency."""

    def __init__(self, source: Source, principal: Principal | None, meaning: QueryMeaning | None = None) -> None:
        self.source = source
        self.principal = principal
        self.report = AccessReport()
        self.options: AccessOptions = {"principal": principal, "report": self.report}
        if filters_in_search(source.retriever):
            self.options["policy"] = source.policy()
        if meaning is not None and ranks_by_meaning(source.retriever):
            self.options["meaning"] = meaning
        if not accepts_principal(source.retriever):
            self.options = {}
        self._untraced = tracing_context(enabled=False)
        self.start = time.perf_counter()

    def __enter__(self) -> _UntracedCall:
        self._untraced.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._untraced.__exit__(kind, exc, tb)
        if isinstance(exc, Exception) and not isinstance(exc, SourceCallError):
            # Any failure of a source is that source's problem; cancellation and exits pass unchanged.
            raise SourceCallError(exc, self.elapsed_ms()) from exc

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000

    def answer(self, raw: Any, *, short: bool = False) -> SourceAnswer:
        return SourceAnswer(raw, self.report.denied, self.elapsed_ms(), tuple(self.report.reasons), short)

    def next_page(self, retriever: BaseRetriever, raw: Any) -> BaseRetriever | None:
        """The retriever to ask again for a larger page (`refill`), or None when `raw` will do or
        cannot grow; the report starts over, since it then counts the new page's hidden hits."""
        if not _short(self.source, retriever, raw, self.principal):
            return None
        larger = larger_page(retriever)
        if larger is not None and self.options:
            self.report = AccessReport()
            self.options["report"] = self.report
        return larger


def _short(source: Source, retriever: BaseRetriever, raw: Any, principal: Principal | None) -> bool:
    """Whether a full page of a source that filters after its search left fewer than k visible documents."""
    want = source.k if source.k is not None else page_size(source.retriever)
    size = page_size(retriever)
    if filters_in_search(source.retriever) or want is None or size is None or not isinstance(raw, list):
        return False
    return len(raw) >= size and len(collect(source, raw, principal)[0]) < want


def _pages(call: _UntracedCall, query: str) -> tuple[BaseRetriever, Any]:
    """The last page asked for (`refill`): the retriever that gave it, and what it returned."""
    retriever: BaseRetriever | None = call.source.retriever
    asked, raw = call.source.retriever, None
    for _ in range(1 + REFILL_ROUNDS):
        if retriever is None:
            break
        asked, raw = retriever, retriever.invoke(query, {"callbacks": []}, **call.options)
        retriever = call.next_page(retriever, raw)
    return asked, raw


def call_untraced(
    source: Source, query: str, principal: Principal | None, meaning: QueryMeaning | None = None
) -> SourceAnswer:
    with _UntracedCall(source, principal, meaning) as call:
        asked, raw = _pages(call, query)
    return call.answer(raw, short=_short(source, asked, raw, principal))


async def _apages(call: _UntracedCall, query: str) -> tuple[BaseRetriever, Any]:
    retriever: BaseRetriever | None = call.source.retriever
    asked, raw = call.source.retriever, None
    for _ in range(1 + REFILL_ROUNDS):
        if retriever is None:
            break
        asked, raw = retriever, await retriever.ainvoke(query, {"callbacks": []}, **call.options)
        retriever = call.next_page(retriever, raw)
    return asked, raw


async def acall_untraced(
    source: Source, query: str, principal: Principal | None, meaning: QueryMeaning | None = None
) -> SourceAnswer:
    with _UntracedCall(source, principal, meaning) as call:
        try:
            # One deadline for every round: a refill never makes a source slower than its timeout.
            asked, raw = await asyncio.wait_for(_apages(call, query), timeout=source.timeout_s)
        except TimeoutError:
            if call.elapsed_ms() >= source.timeout_s * 1000 * 0.99:  # our deadline, not the source's own timeout
                raise SourceCallError(None, call.elapsed_ms()) from None
            raise
    return call.answer(raw, short=_short(source, asked, raw, principal))


def shortfall_error(source: Source) -> SourceError:
    """Said of every source left short after its refill rounds, whatever removed its documents (hidden,
    malformed or empty ones): it names neither how many nor why, so it confirms no hidden document."""
    rounds = 1 + REFILL_ROUNDS
    return SourceError(source=source.name, kind="error",
                       message=f"fewer results than asked for after {rounds} requests; later results were not fetched")


def timeout_error(source: Source) -> SourceError:
    return SourceError(source=source.name, kind="timeout", message=f"no answer within {source.timeout_s:g} s")


def as_source_error(source: Source, exc: BaseException) -> SourceError:
    if isinstance(exc, SourceCallError):
        if exc.cause is None:
            return timeout_error(source)
        exc = exc.cause
    kind: FailureKind
    if isinstance(exc, SourceFailure):
        kind, message = exc.kind, exc.message
    elif isinstance(exc, SourceConfigError):
        kind, message = "config", exc.message
    elif isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        kind, message = "timeout", f"timed out ({one_line(str(exc)) or 'no detail'})"
    else:
        kind, message = "error", f"{type(exc).__name__}: {one_line(str(exc))}".rstrip(": ")
    return SourceError(source=source.name, kind=kind, message=redact(message, source))


def redact(message: str, source: Source) -> str:
    """Defence in depth: a credential must never reach an error message, whoever wrote it."""
    for secret in source.secrets:
        value = secret.get_secret_value()
        if len(value) >= 4:
            message = message.replace(value, "***")
    return message


def collect(source: Source, raw: Any, principal: Principal | None) -> tuple[list[SourceDocument], int, str | None]:
    """A source's hits as visible `SourceDocument`s, the number it may not see, and any data problem.

    A visible document with no valid id (`evident.connectors.base.to_source_document`) is skipped and named
    in the problem, by its title or first words; a hidden one is neither named nor counted there."""
    if not isinstance(raw, list):
        return [], 0, f"malformed answer: expected a list of documents, got {type(raw).__name__}"
    docs: list[SourceDocument] = []
    nameless: list[SourceDocument] = []
    unreadable = 0
    for item in raw:
        if not isinstance(item, Document) or not isinstance(item.page_content, str):
            unreadable += 1
            continue
        try:
            doc = to_source_document(item, source=source.name)
        except NoDocumentId:
            title = item.metadata.get("title")
            doc = SourceDocument(url="", content=item.page_content, title=title if isinstance(title, str) else "",
                                 source=source.name, metadata=dict(item.metadata))
        except (ValueError, ValidationError):
            unreadable += 1
            continue
        if not doc.content.strip():
            continue
        if not ranks_by_meaning(source.retriever):
            # Scores by meaning are ours to compute: a source's own metadata must not steer the extractor.
            doc.metadata = without_meaning(doc.metadata)
        if source.source_type and doc.source_type in {"", LOCAL_SOURCE}:
            doc.source_type = source.source_type
        (docs if doc.url else nameless).append(doc)
    # Chunks before the permission filter: a document fetched whole is checked with its own acl.
    docs = as_chunks(docs, source.retriever)
    visible, denied = filter_documents(docs, principal, default=source.default_acl, fallback_acl=source.acl)
    unnamed, hidden = filter_documents(nameless, principal, default=source.default_acl, fallback_acl=source.acl)
    # The index's rule for ids holds for every source, so no retriever can hand the page or the answer a
    # citation that leads elsewhere (`javascript:`, `//evil.test`, userinfo). Checked after the permission
    # filter: a hidden document with a bad id must not show in the problem below.
    valid = [doc for doc in visible if _valid_id(doc.url)]
    unnamed += [doc for doc in visible if not _valid_id(doc.url)]
    if source.k is not None:
        valid = valid[: source.k]
    return valid, denied + hidden, skipped_problem(unnamed, unreadable)


# Names listed in a skipped-documents problem; the rest are counted.
NAMED_SKIPS = 5
_NAME_WORDS = 8
_NAME_CHARS = 80


def name_of(doc: SourceDocument) -> str:
    """A document as a reader knows it, when it has no id to show: its title, else its first words."""
    name = " ".join((doc.title or "").split()) or " ".join(doc.content.split()[:_NAME_WORDS])
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def skipped_problem(unnamed: list[SourceDocument], unreadable: int) -> str | None:
    """What a source's answer held that cannot be cited: documents named, other items counted."""
    parts = []
    if unnamed:
        names = ", ".join(f'"{name_of(doc)}"' for doc in unnamed[:NAMED_SKIPS])
        more = f" and {len(unnamed) - NAMED_SKIPS} more" if len(unnamed) > NAMED_SKIPS else ""
        many = len(unnamed) > 1
        parts.append(f"{len(unnamed)} document{'s' if many else ''} had no valid id (Document.id, or url or source "
                     f"in its metadata) and {'were' if many else 'was'} skipped: {names}{more}")
    if unreadable:
        many = unreadable > 1
        verb = "were" if many else "was"
        parts.append(f"{unreadable} hit{'s' if many else ''} {verb} not a document with text and {verb} skipped")
    return "; ".join(parts) or None


def _valid_id(url: str) -> bool:
    try:
        validate_document_id(url, allow_file=True)
    except DocumentIdError:
        return False
    return True
