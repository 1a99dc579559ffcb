"""Calling one source: untraced, under its deadline, its answer turned into visible documents.

Sources run with tracing off because their raw answers may hold documents the caller may not see;
errors become `SourceError`s with any credential redacted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langchain_core.documents import Document
from langsmith import tracing_context
from pydantic import ValidationError

from evident.connectors.acl import filter_documents
from evident.connectors.base import to_source_document
from evident.connectors.remote.http import one_line
from evident.connectors.index.loaders import LOCAL_SOURCE
from evident.connectors.source import AccessReport, Source, SourceConfigError, SourceFailure, accepts_principal
from evident.models import Principal, SourceDocument, SourceError


def source_kwargs(source: Source, principal: Principal | None, report: AccessReport) -> dict[str, Any]:
    return {"principal": principal, "report": report} if accepts_principal(source.retriever) else {}


def call_untraced(source: Source, query: str, principal: Principal | None) -> tuple[Any, int, float]:
    report = AccessReport()
    start = time.perf_counter()
    try:
        with tracing_context(enabled=False):
            raw = source.retriever.invoke(query, {"callbacks": []}, **source_kwargs(source, principal, report))
    except BaseException as exc:
        exc.latency_ms = (time.perf_counter() - start) * 1000  # type: ignore[attr-defined]
        raise
    return raw, report.denied, (time.perf_counter() - start) * 1000


async def acall_untraced(source: Source, query: str, principal: Principal | None) -> tuple[Any, int, float]:
    report = AccessReport()
    start = time.perf_counter()
    try:
        with tracing_context(enabled=False):
            call = source.retriever.ainvoke(query, {"callbacks": []}, **source_kwargs(source, principal, report))
            raw = await asyncio.wait_for(call, timeout=source.timeout_s)
    except TimeoutError as exc:
        elapsed = (time.perf_counter() - start) * 1000
        if elapsed >= source.timeout_s * 1000 * 0.99:
            raise Deadline(elapsed) from None
        exc.latency_ms = elapsed  # type: ignore[attr-defined]
        raise
    except BaseException as exc:
        exc.latency_ms = (time.perf_counter() - start) * 1000  # type: ignore[attr-defined]
        raise
    return raw, report.denied, (time.perf_counter() - start) * 1000


class Deadline(Exception):
    def __init__(self, latency_ms: float) -> None:
        self.latency_ms = latency_ms
        super().__init__("deadline")


def timeout_error(source: Source) -> SourceError:
    return SourceError(source=source.name, kind="timeout", message=f"no answer within {source.timeout_s:g} s")


def as_source_error(source: Source, exc: BaseException) -> SourceError:
    if isinstance(exc, Deadline):
        return timeout_error(source)
    if isinstance(exc, SourceFailure):
        kind, message = exc.kind, exc.message
    elif isinstance(exc, SourceConfigError):
        kind, message = "config", exc.message
    elif isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        kind, message = "timeout", f"timed out ({one_line(str(exc)) or 'no detail'})"
    else:
        kind, message = "error", f"{type(exc).__name__}: {one_line(str(exc))}".rstrip(": ")
    return SourceError(source=source.name, kind=kind, message=redact(message, source))  # type: ignore[arg-type]


def redact(message: str, source: Source) -> str:
    """Defence in depth: a credential must never reach an error message, whoever wrote it."""
    for secret in source.secrets:
        value = secret.get_secret_value()
        if len(value) >= 4:
            message = message.replace(value, "***")
    return message


def collect(source: Source, raw: Any, principal: Principal | None) -> tuple[list[SourceDocument], int, str | None]:
    """A source's hits as visible `SourceDocument`s, the number it may not see, and any data problem."""
    if not isinstance(raw, list):
        return [], 0, f"malformed answer: expected a list of documents, got {type(raw).__name__}"
    docs: list[SourceDocument] = []
    bad = 0
    for item in raw:
        if not isinstance(item, Document) or not isinstance(item.page_content, str):
            bad += 1
            continue
        try:
            doc = to_source_document(item, source=source.name)
        except (ValueError, ValidationError):
            bad += 1
            continue
        if not doc.content.strip():
            continue
        if source.source_type and doc.source_type in {"", LOCAL_SOURCE}:
            doc.source_type = source.source_type
        docs.append(doc)
    visible, denied = filter_documents(docs, principal, default=source.default_acl, fallback_acl=source.acl)
    if source.k is not None:
        visible = visible[: source.k]
    problem = f"{bad} of {len(raw)} documents had no url or no text and were skipped" if bad else None
    return visible, denied, problem
