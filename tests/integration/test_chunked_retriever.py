"""A chunked LangChain retriever, as such retrievers are normally built: LangChain's `InMemoryVectorStore` over
`RecursiveCharacterTextSplitter` chunks of real policy text, ranked by the real local model. Every chunk is its
own passage source; citations name the document, at document offsets when the chunk's start is known (its
`start_index`, or the whole document fetched by id), else at chunk offsets with `span_base: "chunk"`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from evident.connectors.index.loaders import load_corpus
from evident.context import EvidentContext
from evident.embeddings.local import LocalEmbeddings
from evident.graph import build_graph
from evident.models import SourceDocument

pytestmark = pytest.mark.embeddings
QUESTION = "How many weeks of paid parental leave do parents receive?"


@pytest.fixture(scope="module")
def leave(examples: Path) -> SourceDocument:
    (doc,) = load_corpus(examples / "policies" / "leave.md")
    return doc


@pytest.fixture(scope="module")
def embeddings() -> LocalEmbeddings:
    return LocalEmbeddings()


def _retriever(leave: SourceDocument, embeddings: LocalEmbeddings, *, start_index: bool) -> BaseRetriever:
    splitter = RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=0, add_start_index=start_index)
    chunks = splitter.create_documents([leave.content], metadatas=[{"source": leave.url, "title": leave.title}])
    assert len(chunks) > 10
    return InMemoryVectorStore.from_documents(chunks, embeddings).as_retriever(search_kwargs={"k": 4})


def _ask(retriever: BaseRetriever) -> dict[str, Any]:
    ctx = EvidentContext(embeddings="none", k=4, top_n=8)
    return build_graph(retriever=retriever).invoke({"query": QUESTION}, context=ctx)  # type: ignore[return-value]


def test_every_chunk_is_kept_and_cited_at_document_offsets(leave: SourceDocument, embeddings: LocalEmbeddings) -> None:
    out = _ask(_retriever(leave, embeddings, start_index=True))
    chunks = [d for d in out["documents"] if d["metadata"].get("chunk_of") == leave.url]
    assert len(chunks) == 4, [d["url"] for d in out["documents"]]  # none deduplicated away
    assert len({d["url"] for d in chunks}) == 4
    for chunk in chunks:  # each chunk's text is the document's at its start
        start = chunk["metadata"]["chunk_start"]
        assert leave.content[start : start + len(chunk["content"])] == chunk["content"]
    assert out["status"] == "answered"
    assert "18 weeks" in out["answer"]
    assert out["citations"]
    for citation in out["citations"]:
        assert citation["url"] == leave.url and citation["span_base"] == "document"
        assert citation["quote"] == " … ".join(leave.content[s:e] for s, e in citation["spans"])
    assert f"[{leave.url}]" in out["answer"] and "#chunk-" not in out["answer"]


def test_without_start_index_the_spans_are_the_chunks(leave: SourceDocument, embeddings: LocalEmbeddings) -> None:
    out = _ask(_retriever(leave, embeddings, start_index=False))
    chunks = {d["url"]: d for d in out["documents"] if d["metadata"].get("chunk_of") == leave.url}
    assert len(chunks) == 4 and all(d["metadata"]["chunk_start"] is None for d in chunks.values())
    assert out["citations"]
    for citation in out["citations"]:
        assert citation["url"] == leave.url and citation["span_base"] == "chunk"
        assert any(citation["quote"] == " … ".join(d["content"][s:e] for s, e in citation["spans"])
                   for d in chunks.values())


class _Fetching(BaseRetriever):
    """The same store's retriever, and a way to read a whole document by its id (`DocumentFetcher`)."""

    inner: BaseRetriever
    whole: SourceDocument

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.inner.invoke(query)

    def fetch_document(self, url: str) -> Document | None:
        if url != self.whole.url:
            return None
        return Document(page_content=self.whole.content, metadata={"source": url, "title": self.whole.title})


def test_a_whole_document_fetched_by_id_replaces_its_chunks(leave: SourceDocument, embeddings: LocalEmbeddings) -> None:
    out = _ask(_Fetching(inner=_retriever(leave, embeddings, start_index=False), whole=leave))
    assert [d["url"] for d in out["documents"]] == [leave.url]
    assert out["documents"][0]["content"] == leave.content
    assert out["citations"]
    for citation in out["citations"]:
        assert citation["url"] == leave.url and citation["span_base"] == "document"
        assert citation["quote"] == " … ".join(leave.content[s:e] for s, e in citation["spans"])


def test_a_source_cannot_pose_as_a_chunk_of_another_page() -> None:
    forged = Document(page_content="Parents receive 18 weeks of paid parental leave.",
                      metadata={"url": "https://evil.example/page", "chunk_of": "https://policies.example/leave",
                                "chunk_start": 0})  # fmt: skip

    class _One(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return [forged]

    out = _ask(_One())
    assert [c["url"] for c in out["citations"]] == ["https://evil.example/page"]
