"""Any LangChain document loader as a bulk source, loaded into the embedded index by `evident index --config`.

Many systems already have a LangChain `BaseLoader` (in partner packages or langchain-community). A
loader reads everything at once, as one account, with no notion of who may read what, so it is a way to
*load* a source, not to search it live: its documents become a JSONL snapshot next to the index (as a
crawled docs site does), and queries search the index. Metadata maps onto EvidenT's fields: the id is
`url` (or LangChain's usual `source`, a file path or name made a safe id, or `id`, or `url_template`
filled from the metadata), `title` (or `name`), `acl` as any document's; the rest stays metadata. A
refresh rewrites only the documents whose id is new, whose text or metadata changed, or that are gone;
documents without any id are named by a hash of their text, so a changed one is replaced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from pydantic import BaseModel, Field

from evident.connectors.index.corpus import IndexStats
from evident.connectors.index.doc_ids import DocumentIdError, safe_document_id, validate_document_id
from evident.connectors.remote.docs_index import index_pages
from evident.connectors.source import SourceFailure

SkipReporter = Callable[[str, str], None]
ID_KEYS = ("url", "source", "id")
TITLE_KEYS = ("title", "name")


class LoaderMapping(BaseModel):
    """How a loader's documents become EvidenT documents."""

    source_name: str
    source_type: str = ""
    url_template: str | None = Field(None, description="e.g. 'https://wiki.example.com/wiki/{source}'; "
                                                       "metadata values are URL-quoted")
    max_documents: int = Field(100_000, ge=1)


class LoaderRefreshStats(IndexStats):
    loaded: int = 0
    pages: int = 0


def loader_records(
    documents: Iterator[Document], mapping: LoaderMapping, on_skip: SkipReporter | None = None
) -> list[dict[str, Any]]:
    """JSONL records (url, title, text, source_type, metadata) of a loader's documents; the first of an id wins."""
    records: dict[str, dict[str, Any]] = {}
    for position, doc in enumerate(documents, start=1):
        if position > mapping.max_documents:
            _skip(on_skip, f"document {position}",
                  f"more than max_documents = {mapping.max_documents}; the rest is not loaded")
            break
        text = doc.page_content if isinstance(doc.page_content, str) else ""
        if not text.strip():
            _skip(on_skip, _label(doc, position), "no text")
            continue
        metadata = dict(doc.metadata or {})
        try:
            url = _document_id(doc, metadata, text, mapping)
        except (DocumentIdError, KeyError, ValueError) as exc:
            _skip(on_skip, _label(doc, position), f"no usable id ({exc})")
            continue
        titles = (str(metadata[k]) for k in TITLE_KEYS if isinstance(metadata.get(k), str) and metadata[k].strip())
        title = next(titles, "")
        for key in ("url", "title"):
            metadata.pop(key, None)
        record: dict[str, Any] = {"url": url, "title": title.strip(), "text": text,
                                  # JSON, as the snapshot stores it: dates and other objects become strings
                                  "metadata": json.loads(json.dumps(metadata, default=str))}
        if mapping.source_type:
            record["source_type"] = mapping.source_type
        records.setdefault(url, record)
    return list(records.values())


def refresh_loader_index(
    loader: BaseLoader, mapping: LoaderMapping, index_path: Path, *, on_skip: SkipReporter | None = None
) -> LoaderRefreshStats:
    """Load every document and bring the index up to date; a load that yields nothing leaves it as it was."""
    try:
        records = loader_records(loader.lazy_load(), mapping, on_skip)
    except Exception as exc:  # noqa: BLE001 - a third-party loader can raise anything
        raise SourceFailure(f"the loader failed: {type(exc).__name__}: {exc}") from None
    if not records:
        raise SourceFailure("the loader gave no document with text; the index was left as it was")
    stats, count = index_pages(index_path, records)
    return LoaderRefreshStats(**stats.model_dump(), loaded=len(records), pages=count)


def _document_id(doc: Document, metadata: dict[str, Any], text: str, mapping: LoaderMapping) -> str:
    if mapping.url_template:
        values = {k: quote(str(v), safe="/:") for k, v in metadata.items() if isinstance(v, (str, int, float))}
        if doc.id and "id" not in values:
            values["id"] = quote(str(doc.id), safe="/:")
        return validate_document_id(mapping.url_template.format_map(values))
    for key in ID_KEYS:
        value = metadata.get(key)
        if isinstance(value, (str, int)) and str(value).strip():
            # `source` is a loader's file path or name: made an id as a retriever's `source` is (base.py).
            return validate_document_id(safe_document_id(str(value)) if key == "source" else str(value).strip())
    if doc.id:
        return validate_document_id(str(doc.id))
    # No id at all: the text names the document, so a changed text is a new document (and the old one goes).
    return f"{mapping.source_name}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def _label(doc: Document, position: int) -> str:
    for key in ID_KEYS:
        if isinstance(doc.metadata.get(key), (str, int)):
            return str(doc.metadata[key])[:200]
    return f"document {position}"


def _skip(on_skip: SkipReporter | None, what: str, why: str) -> None:
    if on_skip is not None:
        on_skip(what, why)
