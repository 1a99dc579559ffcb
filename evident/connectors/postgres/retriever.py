"""A LangChain retriever over a PostgreSQL source: permissions in the SQL, meaning on the client.

By words, the search is `search.ranked` (weighted `ts_rank`, IDF over the caller's documents, counts cached
per generation, at most `candidate_pool` candidates), with the
page whose title the question names best among the first TITLE_FIRST_DEPTH first, as the embedded index
does. Given the query's meaning, the best HYBRID_DEPTH of that search are re-ranked by words and meaning
together (`hybrid.hybrid_ranking`, the embedded index's fusion) from the vectors stored beside the text;
a candidate without stored vectors of the model (changed since `evident index`) is embedded here, once
per process. Debian 12 has no pgvector, so no search by meaning alone reaches documents the words missed.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from pydantic import ConfigDict, PrivateAttr

from evident.connectors.hybrid import Candidate, hybrid_ranking
from evident.connectors.in_search import SearchesVisible
from evident.connectors.index.embedded import HYBRID_DEPTH
from evident.connectors.index.ranking import TITLE_FIRST_DEPTH, title_first
from evident.connectors.index.vectors import vectors_key
from evident.connectors.postgres.connections import Connections
from evident.connectors.postgres.dsn import PostgresDsn
from evident.connectors.postgres.refresh import embed_missing, unembedded
from evident.connectors.postgres.schema import table
from evident.connectors.postgres.search import (
    CANDIDATE_POOL,
    WORK_MEM_MB,
    Hit,
    VisibleCounts,
    document,
    lexemes,
    ranked,
    snapshot,
    stored_model,
    stored_windows,
)
from evident.connectors.source import RanksByMeaning, StoresVectors
from evident.conversation.asking import weighted_terms
from evident.embeddings.meaning import QueryMeaning, Window
from evident.embeddings.windows import document_windows
from evident.models import SourceDocument

if TYPE_CHECKING:
    from collections.abc import Callable

    from evident.connectors.index.vectors import EmbedProgress, EmbedStats
    from evident.embeddings.scorer import SemanticScorer


class PostgresRetriever(StoresVectors, RanksByMeaning, SearchesVisible):
    """The `k` best documents of a PostgreSQL source that the `principal` may see under `policy`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    connections: Connections
    db_schema: str = "evident"
    text_search_config: str = "english"
    source_name: str = "postgres"
    candidate_pool: int = CANDIDATE_POOL  # documents ranked per search at most (search.candidate_words)
    work_mem_mb: int = WORK_MEM_MB  # a search's memory per bitmap (search.snapshot)

    _counts: VisibleCounts = PrivateAttr(default_factory=VisibleCounts)
    _ready: set[str] = PrivateAttr(default_factory=set)  # models whose vectors this process saw complete
    _embedding: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def embed_index(self, scorer: SemanticScorer, *, progress: EmbedProgress | None = None,
                    stop: Callable[[], bool] | None = None) -> EmbedStats | None:
        """Vectors for the documents that have none of `scorer`'s model (`refresh.embed_missing`): what
        `evident index` does, left to the first query (or a server's background embedding) when it ran
        without embeddings. Checked once per process and model, until a run is not stopped; documents
        changed later are embedded by the query that retrieves them."""
        with self._embedding:
            if scorer.model_id in self._ready:
                return None
            with self.connections.borrowed() as conn:
                try:
                    missing = len(unembedded(conn, self.db_schema, scorer.model_id))
                except psycopg.errors.UndefinedTable:
                    return None  # not indexed yet: the search says so
            stats = embed_missing(self.connections, self.db_schema, scorer, progress, stop) if missing else None
            if stats is None or not stats.stopped:
                self._ready.add(scorer.model_id)
            return stats

    def search_visible(
        self, query: str, visible: list[str], meaning: QueryMeaning | None
    ) -> list[tuple[SourceDocument, float]]:
        """The ranking (module docstring), each document with its lexical score; raises `SourceFailure`."""
        terms, _ = weighted_terms(query)
        depth = max(self.k, TITLE_FIRST_DEPTH) if meaning is None else max(self.k, TITLE_FIRST_DEPTH, HYBRID_DEPTH)
        with self.connections.borrowed() as conn, snapshot(conn, self.work_mem_mb):
            words = lexemes(conn, self.db_schema, self.text_search_config, query, visible, self._counts)
            hits = ranked(conn, self.db_schema, self.text_search_config, words, visible, depth, self.candidate_pool)
            if meaning is None:
                first = title_first(terms, [(h.doc.title, h.score) for h in hits[:TITLE_FIRST_DEPTH]])
                order = [hits[first], *hits[:first], *hits[first + 1 :]] if first else hits
                return [(h.doc, h.score) for h in order[: self.k]]
            stored = (stored_windows(conn, self.db_schema, [h.id for h in hits], meaning.vector)
                      if hits and stored_model(conn, self.db_schema) == vectors_key(meaning.model_id) else {})
        candidates = [Candidate(h.doc, h.score, stored.get(h.id) or _windows_now(h, meaning)) for h in hits]
        return hybrid_ranking(candidates, terms, meaning.weight, self.k)

    def get_visible(self, url: str, visible: list[str]) -> SourceDocument | None:
        """The row of `url` as it is now, if the caller's `visible` tokens admit it (permissions in the SQL)."""
        with self.connections.borrowed() as conn:
            row = conn.execute(sql.SQL("SELECT url, title, source, source_type, content, content_hash, metadata"
                                       " FROM {} WHERE url = %s AND acl_tokens && %s::text[]")
                               .format(table(self.db_schema, "documents")), (url, list(visible))).fetchone()
        return document(row) if row is not None else None

    def close(self) -> None:
        self.connections.close()


def _windows_now(hit: Hit, meaning: QueryMeaning) -> list[Window]:
    """The windows of a candidate that has no stored vectors, embedded now (the scorer caches them)."""
    spans, texts = document_windows(hit.doc.title, hit.doc.content)
    if spans == [(0, 0)]:
        return []
    cosines = meaning.scorer.similarities(meaning.vector, texts)
    return [(s, e, float(c)) for (s, e), c in zip(spans, cosines, strict=True)]


def build_retriever(dsn: PostgresDsn, *, schema: str, config: str, k: int, source_name: str, timeout_s: float,
                    statement_timeout_ms: int | None, candidate_pool: int = CANDIDATE_POOL,
                    work_mem_mb: int = WORK_MEM_MB) -> PostgresRetriever:  # fmt: skip
    """A retriever over the source; it connects on its first search, not here."""
    statement = statement_timeout_ms if statement_timeout_ms is not None else max(1, int(timeout_s * 1000))
    connections = Connections(dsn, connect_timeout_s=timeout_s, statement_timeout_ms=statement)
    return PostgresRetriever(connections=connections, db_schema=schema, text_search_config=config, k=k,
                             source_name=source_name, candidate_pool=candidate_pool, work_mem_mb=work_mem_mb)
