"""Chunks from a LangChain retriever: each one its own passage source, tied to the document it was cut from.

Vector stores and search engines usually index a document as chunks, each `Document` carrying the
document's id (`url`, or LangChain's `source`) in its metadata. Several chunks of one document in one
answer are each kept, under an id of their own, `<url>#chunk-<n>`, so that fusion and deduplication, which
go by id, cannot keep one and drop the others (the one that holds the answer, say). Each chunk records
`chunk_of` (the document's id) and `chunk_start`, where its text begins in the document:

- the chunk's own `start_index` (LangChain's text splitters with `add_start_index=True`), or
- when the retriever can give the whole document (`DocumentFetcher`), the chunks of that document are
  replaced by the whole document itself, so its spans are document offsets as any other's;
- otherwise None: the chunk's spans are offsets into the chunk alone, and its citations say so
  (`span_base: "chunk"`, `cited_in_document`).

A hit with neither `start_index` nor another chunk of its document beside it is a document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document

from evident.alignment.models import SourceDocument
from evident.connectors.base import to_source_document
from evident.models import Citation

CHUNK_MARK = "#chunk-"
CHUNK_OF = "chunk_of"
CHUNK_START = "chunk_start"
START_INDEX = "start_index"


@runtime_checkable
class DocumentFetcher(Protocol):
    """A retriever that can give the whole text of a document by its id (None when it has no such document)."""

    def fetch_document(self, url: str) -> Document | SourceDocument | None: ...


def _start_of(doc: SourceDocument) -> int | None:
    start = doc.metadata.get(START_INDEX)
    # bool is an int: `True` is no offset.
    return start if isinstance(start, int) and not isinstance(start, bool) and start >= 0 else None


def as_chunks(docs: Sequence[SourceDocument], retriever: Any) -> list[SourceDocument]:
    """`docs` (one source's hits, in its order) with its chunks as described in the module docstring."""
    # Only this module says what is a chunk: a source's own `chunk_of` could make a citation name another page.
    docs = [doc.model_copy(update={"metadata": {k: v for k, v in doc.metadata.items() if k not in (CHUNK_OF,
                                                                                                   CHUNK_START)}})
            if CHUNK_OF in doc.metadata or CHUNK_START in doc.metadata else doc for doc in docs]  # fmt: skip
    per_url: dict[str, int] = {}
    for doc in docs:
        per_url[doc.url] = per_url.get(doc.url, 0) + 1
    fetched: dict[str, SourceDocument | None] = {}
    out: list[SourceDocument] = []
    numbers: dict[str, int] = {}
    for doc in docs:
        start = _start_of(doc)
        if start is None and per_url[doc.url] == 1:
            out.append(doc)
            continue
        if isinstance(retriever, DocumentFetcher) and start is None:
            if doc.url not in fetched:
                fetched[doc.url] = _whole(retriever, doc)
                whole = fetched[doc.url]
                if whole is not None:
                    out.append(whole)
                    continue
            elif fetched[doc.url] is not None:
                continue  # this document is already in, whole
        numbers[doc.url] = numbers.get(doc.url, 0) + 1
        metadata = {k: v for k, v in doc.metadata.items() if k != START_INDEX}
        metadata.update({CHUNK_OF: doc.url, CHUNK_START: start})
        out.append(doc.model_copy(update={"url": f"{doc.url}{CHUNK_MARK}{numbers[doc.url]}", "metadata": metadata}))
    return out


def _whole(retriever: DocumentFetcher, chunk: SourceDocument) -> SourceDocument | None:
    """The whole document of `chunk`, when the retriever has it and it holds the chunk's text."""
    found = retriever.fetch_document(chunk.url)
    whole = to_source_document(found) if isinstance(found, Document) else found
    if whole is None or chunk.content.strip() not in whole.content:
        return None  # not the document this chunk was cut from: the chunk stays a chunk
    return whole.model_copy(update={"url": chunk.url, "source": chunk.source,
                                    "source_type": whole.source_type or chunk.source_type,
                                    "title": whole.title or chunk.title})  # fmt: skip


def document_of(doc: SourceDocument) -> str:
    """The id of the document a retrieved text belongs to: a chunk's document, else its own."""
    of = doc.metadata.get(CHUNK_OF)
    return of if isinstance(of, str) and of else doc.url


def cited_in_document(citation: Citation, doc: SourceDocument | None) -> Citation:
    """A citation of a chunk as a citation of its document: the document's id and, where the chunk's start
    is known, spans shifted to document offsets; otherwise the spans stay the chunk's (`span_base: "chunk"`)."""
    if doc is None or CHUNK_OF not in doc.metadata:
        return citation
    start = doc.metadata.get(CHUNK_START)
    if isinstance(start, int) and not isinstance(start, bool):
        spans = [(s + start, e + start) for s, e in citation.spans]
        return citation.model_copy(update={"url": document_of(doc), "spans": spans, "span_base": "document"})
    return citation.model_copy(update={"url": document_of(doc), "span_base": "chunk"})
