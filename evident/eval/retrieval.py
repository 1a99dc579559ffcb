"""Retrieval once per query, shared by every method, and its replay inside the EvidenT graph.

The comparison then isolates extraction and generation: every method sees the very same documents
in the same order (paper §5). Retrieval ranks as `evident ask` does, by meaning as well as by words
when embeddings are on; what meaning found in each document is recorded with the query and handed
back with the replayed documents, so the graph's extractor scores them as it would have live.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.alignment.models import SourceDocument
from evident.connectors.base import to_langchain_document
from evident.connectors.federated import FederatedRetriever
from evident.connectors.query_meaning import prepare_meaning
from evident.connectors.retrievers import default_retriever
from evident.connectors.source import RanksByMeaning
from evident.context import EvidentContext
from evident.embeddings.meaning import SEMANTIC_KEYS, without_meaning
from evident.embeddings.resolve import describe, resolve_embeddings
from evident.eval.records import RetrievalRecord


def retrieval_settings(ctx: EvidentContext) -> list[Any]:
    """What the retrieved documents depend on (besides the query)."""
    return [ctx.corpus_paths(), ctx.sources, ctx.index_path, ctx.k, ctx.top_n,
            describe(resolve_embeddings(ctx)), ctx.semantic_weight]  # fmt: skip


def _split_meaning(doc: SourceDocument) -> tuple[SourceDocument, dict[str, Any]]:
    """The document without what meaning found in it for one query, and that part alone."""
    marks = {k: doc.metadata[k] for k in SEMANTIC_KEYS if k in doc.metadata}
    if not marks:
        return doc, {}
    return doc.model_copy(update={"metadata": without_meaning(doc.metadata)}), marks


def with_meaning(docs: list[SourceDocument], rec: RetrievalRecord) -> list[SourceDocument]:
    """`docs` (the record's, in its order) with what meaning found in each for the record's query."""
    if not rec.semantic or len(rec.semantic) != len(docs):
        return docs
    return [d.model_copy(update={"metadata": {**d.metadata, **marks}}) if marks else d
            for d, marks in zip(docs, rec.semantic, strict=True)]  # fmt: skip


class SharedRetrieval:
    """The configured retriever (the local corpus or the federated sources), as `evident ask` uses it."""

    def __init__(self, ctx: EvidentContext) -> None:
        self.ctx = ctx
        found = default_retriever(ctx)
        self.federated = (
            found if isinstance(found, FederatedRetriever)
            else FederatedRetriever.wrap(found, name="local", timeout_s=ctx.retrieve_timeout_s, top_n=ctx.top_n)
        )

    def search(self, query_id: str, query: str, key: str) -> tuple[RetrievalRecord, list[SourceDocument]]:
        """The record of `query`'s retrieval and its documents, without their per-query metadata
        (`with_meaning` puts it back from the record)."""
        query = query.strip()
        start = time.perf_counter()
        prepared = prepare_meaning(self.federated, resolve_embeddings(self.ctx), query, self.ctx.semantic_weight)
        result = self.federated.search(query, meaning=prepared.meaning)
        ms = (time.perf_counter() - start) * 1000
        split = [_split_meaning(d) for d in result.documents[: self.ctx.top_n]]
        docs = [d for d, _ in split]
        semantic = [marks for _, marks in split] if any(marks for _, marks in split) else []
        rec = RetrievalRecord(
            key=key, query_id=query_id, urls=[d.url for d in docs], hashes=[d.content_hash for d in docs],
            latency_ms=round(ms, 2), semantic=semantic,
            errors=[f"{e.source}: {e.message}" for e in [*prepared.errors, *result.errors]],
        )
        return rec, docs


class ReplayRetriever(RanksByMeaning, BaseRetriever):
    """Returns the recorded documents of a query, in their recorded order. They were ranked by
    meaning when recorded (`SharedRetrieval`): the graph must neither rank them again nor drop what
    meaning found in them, hence `RanksByMeaning` (the run's `meaning` is not needed)."""

    by_query: dict[str, list[SourceDocument]]
    source_name: str = "local"

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, meaning: object = None
    ) -> list[Document]:
        return [to_langchain_document(d) for d in self.by_query.get(query.strip(), [])]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, meaning: object = None
    ) -> list[Document]:
        # BaseRetriever's async fallback would not accept `meaning`; the replay needs no thread.
        return [to_langchain_document(d) for d in self.by_query.get(query.strip(), [])]
