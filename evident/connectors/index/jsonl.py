"""JSONL corpora: one document per line, `{"url", "title", "text", "metadata"?, "source_type"?}`.

A broken line fails the whole file (`CorpusError` naming file and line): silently indexing half a
dataset is worse than failing. So is a url claimed by two lines (or by a line and a section of a long
line's document): neither may win. An over-long line is skipped and reported.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path

from evident.alignment.models import SourceDocument
from evident.connectors.index.corpus import (
    LOCAL_SOURCE,
    CorpusError,
    CorpusLimits,
    SkipHandler,
    one_document_per_url,
    too_large,
    url_conflict,
)
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.sections import split_sections


def load_jsonl(path: Path, relative: str, report: SkipHandler, limits: CorpusLimits) -> Iterator[SourceDocument]:
    """The documents of a JSONL corpus, long ones as sections; each URL at most once (else `CorpusError`)."""

    def repeat(doc: SourceDocument, number: int, first_doc: SourceDocument, first: int) -> None:
        raise url_conflict(path, doc, f"line {first}", first_doc, number)

    # Sections are checked too: a line may not take the id of another line's section, nor the reverse.
    found = ((part, number) for doc, number in _numbered(path, relative, report, limits)
             for part in split_sections(doc, limits.section_chars))
    return one_document_per_url(found, repeat)


def _numbered(
    path: Path, relative: str, report: SkipHandler, limits: CorpusLimits
) -> Iterator[tuple[SourceDocument, int]]:
    """Every line's document with its line number (blank and over-long lines skipped)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        # The corpus file itself is unreadable: nothing can be loaded, so this is not a skip.
        raise CorpusError(path, f"cannot read ({exc.strerror or exc.__class__.__name__})") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            if len(raw) > limits.max_file_bytes:
                report(path, f"line {number}: {too_large(len(raw), limits)}")
                continue
            yield _jsonl_document(path, number, raw, relative), number


def _jsonl_document(path: Path, number: int, raw: bytes, relative: str) -> SourceDocument:
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorpusError(path, "not valid UTF-8", number) from None
    except json.JSONDecodeError as exc:
        raise CorpusError(path, f"invalid JSON ({exc.msg})", number) from None
    if not isinstance(record, dict):
        raise CorpusError(path, f"expected a JSON object, got {type(record).__name__}", number)
    url = record.get("url")
    if not isinstance(url, str) or not url.strip():
        raise CorpusError(path, "missing or empty 'url'", number)
    try:
        validate_document_id(url.strip())
    except DocumentIdError as exc:
        raise CorpusError(path, str(exc), number) from None
    text = record.get("text", record.get("content"))
    if not isinstance(text, str) or not text.strip():
        raise CorpusError(path, "missing or empty 'text'", number)
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise CorpusError(path, "'metadata' must be a JSON object", number)
    title = record.get("title") or ""
    source_type = record.get("source_type") or LOCAL_SOURCE
    if not isinstance(title, str) or not isinstance(source_type, str):
        raise CorpusError(path, "'title' and 'source_type' must be strings", number)
    return SourceDocument(
        url=url.strip(),
        title=title.strip(),
        content=text,
        source=LOCAL_SOURCE,
        source_type=source_type,
        # No line number in metadata: inserting one line would then "change" every later document.
        metadata={**metadata, "path": relative},
    )
