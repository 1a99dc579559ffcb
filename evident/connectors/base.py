"""Conversions between LangChain `Document`s and EvidenT's `SourceDocument`s.

LangChain retrievers speak `Document` (flat metadata); the pipeline verifies against
`SourceDocument`. The mapping is lossless for EvidenT's own fields, so any retriever (ours or a
third party's) can sit behind a source and its documents come back unchanged.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from evident.alignment.models import SourceDocument
from evident.connectors.index.doc_ids import safe_document_id

# Top-level SourceDocument fields carried in Document.metadata; everything else is user metadata.
RESERVED_KEYS = ("url", "title", "source", "source_type", "content_hash")


def to_langchain_document(doc: SourceDocument, **extra: Any) -> Document:
    """A `Document` whose metadata holds the fields, the user metadata and any `extra` keys.

    EvidenT's fields win over user metadata of the same name: a metadata key must never be able to
    change the URL a citation points to.
    """
    metadata: dict[str, Any] = {**doc.metadata, **extra}
    metadata.update(
        url=doc.url,
        title=doc.title,
        source=doc.source,
        source_type=doc.source_type,
        content_hash=doc.content_hash,
    )
    return Document(page_content=doc.content, metadata=metadata)


class NoDocumentId(ValueError):
    """A `Document` with no id to cite it by (no `Document.id`, `url` or `source`)."""


def _given(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def to_source_document(doc: Document, *, source: str | None = None) -> SourceDocument:
    """The `SourceDocument` of a `Document` from any LangChain retriever.

    Its id (the `url` citations name) is, in this order: `metadata["url"]`; `metadata["source"]`
    (where LangChain's loaders put a file path or a name), made a safe id
    (`evident.connectors.index.doc_ids.safe_document_id`: `Travel Policy.pdf` → `Travel%20Policy.pdf`)
    with the original kept as the title when there is none; then `Document.id`. A vector store gives
    every chunk its own `Document.id` (a key such as a UUID) and keeps the document's path in `source`,
    so the path comes first: it names the document a reader can open, and ties the chunks of one
    document together (evident/connectors/chunks.py). Raises `NoDocumentId` when there is none.
    `source` overrides the source name. The content hash is always recomputed from the text, so a stale
    hash in metadata cannot poison caches keyed by it.
    """
    metadata = dict(doc.metadata)
    url, named = _given(metadata.pop("url", None)), _given(metadata.pop("source", None))
    title = str(metadata.pop("title", "") or "")
    if not url and named:
        url, title, named = safe_document_id(named), title or named, None
    url = url or _given(doc.id)
    if not url:
        raise NoDocumentId("document has no id: no 'url' or 'source' in its metadata, and no Document.id")
    metadata.pop("content_hash", None)
    return SourceDocument(
        url=url,
        content=doc.page_content,
        title=title,
        source=source if source is not None else str(named or ""),
        source_type=str(metadata.pop("source_type", "") or ""),
        metadata=metadata,
    )
