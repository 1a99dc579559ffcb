"""Conversions between LangChain `Document`s and EvidenT's `SourceDocument`s.

LangChain retrievers speak `Document` (flat metadata); the pipeline verifies against
`SourceDocument`. The mapping is lossless for EvidenT's own fields, so any retriever (ours or a
third party's) can sit behind a source and its documents come back unchanged.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from evident.alignment.models import SourceDocument

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


def to_source_document(doc: Document, *, source: str | None = None) -> SourceDocument:
    """The `SourceDocument` of a `Document` from any LangChain retriever.

    Third-party loaders conventionally put the URL or file path in `metadata["source"]`; it is used
    as the URL when there is no `url` key. `source` overrides the source name. The content hash is
    always recomputed from the text, so a stale hash in metadata cannot poison caches keyed by it.
    """
    metadata = dict(doc.metadata)
    url = metadata.pop("url", None)
    source_name = metadata.pop("source", None)
    if not url and isinstance(source_name, str) and source_name:
        url, source_name = source_name, None
    if not isinstance(url, str) or not url:
        raise ValueError("document has no 'url' (or 'source') in its metadata")
    metadata.pop("content_hash", None)
    return SourceDocument(
        url=url,
        content=doc.page_content,
        title=str(metadata.pop("title", "") or ""),
        source=source if source is not None else str(source_name or ""),
        source_type=str(metadata.pop("source_type", "") or ""),
        metadata=metadata,
    )
