"""Retrieval once per query, shared by every method, and its replay inside the EvidenT graph.

The comparison then isolates extraction and generation: every method sees the very same documents
in the same order (paper §5).
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.alignment.models import SourceDocument
from evident.connectors.base import to_langchain_document
from evident.context import EvidentContext
from evident.eval.records import RetrievalRecord


def retrieval_settings(ctx: EvidentContext) -> list[Any]:
    """What the retrieved documents depend on (besides the query)."""
    return [ctx.corpus_paths(), ctx.sources, ctx.index_path, ctx.k, ctx.top_n]


class SharedRetrieval:
    """The configured retriever (the local corpus or the federated sources), as `evident ask` uses it."""

    def __init__(self, ctx: EvidentContext) -> None:
        from evident.connectors.federated import FederatedRetriever
        from evident.connectors.retrievers import default_retriever

        self.ctx = ctx
        found = default_retriever(ctx)
        self.federated = (
            found if isinstance(found, FederatedRetriever)
            else FederatedRetriever.wrap(found, name="local", timeout_s=ctx.retrieve_timeout_s, top_n=ctx.top_n)
        )

    def search(self, query_id: str, query: str, key: str) -> tuple[RetrievalRecord, list[SourceDocument]]:
        start = time.perf_counter()
        result = self.federated.search(query.strip())
        ms = (time.perf_counter() - start) * 1000
        docs = result.documents[: self.ctx.top_n]
        rec = RetrievalRecord(
            key=key, query_id=query_id, urls=[d.url for d in docs], hashes=[d.content_hash for d in docs],
            latency_ms=round(ms, 2), errors=[f"{e.source}: {e.message}" for e in result.errors],
        )
        return rec, docs


class ReplayRetriever(BaseRetriever):
    """Returns the recorded documents of a query, in their recorded order."""

    by_query: dict[str, list[SourceDocument]]
    source_name: str = "local"

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_langchain_document(d) for d in self.by_query.get(query.strip(), [])]
