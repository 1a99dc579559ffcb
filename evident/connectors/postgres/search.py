"""The full-text search of a PostgreSQL source: the caller's best documents by weighted rank.

A question is its content words (`fts_query.weighted_terms`, as the embedded index reads it: greetings
and request phrases left out, the asking part weighted above the scenario). Each word goes through
`websearch_to_tsquery`, which stems it and drops stop words; a document matches when it holds any of
them (the words joined by `or`: a question's words are never all in one page), and scores

    score = Σ over the distinct lexemes t of  weight(t) × idf(t) × ts_rank({D, C, B, A}, tsv, t, 1)

`ts_rank` counts the lexeme's occurrences, weighted by where they are (title A = 1.0, headings B = 0.7,
body D = 0.5) and divided by 1 + log(document length) (normalisation 1). idf(t) = ln(1 + (N - n + 0.5) /
(n + 0.5)) is BM25's, with N and n counted over the documents the caller may see only: like every
other part of the search, it is the same as in a database that held only those documents. The
permission filter is in the WHERE clause (`acl_tokens && caller's tokens`), so the top k are the
caller's top k. Ties go by url.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from evident.alignment.models import SourceDocument
from evident.connectors.index.fts_query import weighted_terms
from evident.connectors.postgres.schema import table
from evident.embeddings.meaning import Window, without_meaning

# ts_rank's weights, in its order {D, C, B, A}: body, (unused), headings, title. PostgreSQL's default
# {0.1, 0.2, 0.4, 1.0} measured worst of those tried on the development set's tune part (recall @1/@3/@8
# 0.579/0.710/0.811 by words; these 0.639/0.779/0.869; docs/postgres.md).
RANK_WEIGHTS = [0.5, 0.2, 0.7, 1.0]
RANK_NORMALIZATION = 1  # divide by 1 + log(document length): a long page does not win by length alone
MAX_WORDS = 32  # a question's words searched at most: bounds the cost of one query

_COLUMNS = ("url", "title", "source", "source_type", "content", "content_hash", "metadata")


@dataclass(frozen=True)
class Lexeme:
    """One distinct lexeme of the question: a word that stands for it, its `websearch_to_tsquery`, its weight
    and its IDF."""

    word: str
    query: str
    weight: float
    idf: float


@dataclass(frozen=True)
class Hit:
    id: int
    doc: SourceDocument
    score: float


def lexemes(conn: psycopg.Connection, schema: str, config: str, query: str,
            visible: Sequence[str]) -> list[Lexeme]:  # fmt: skip
    """The question's distinct lexemes that some document the caller may see holds, with their IDF."""
    terms, weights = weighted_terms(query)
    terms = terms[:MAX_WORDS]
    if not terms:
        return []
    documents = table(schema, "documents")
    total = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE acl_tokens && %s::text[]").format(documents),
                         (list(visible),)).fetchone()  # fmt: skip
    n_documents = int(total[0]) if total else 0
    rows = conn.execute(sql.SQL(
        "SELECT w.word, websearch_to_tsquery(%(config)s::regconfig, w.word)::text,"
        " (SELECT count(*) FROM {} d WHERE d.tsv @@ websearch_to_tsquery(%(config)s::regconfig, w.word)"
        "  AND d.acl_tokens && %(visible)s::text[])"
        " FROM unnest(%(words)s::text[]) WITH ORDINALITY AS w(word, n) ORDER BY w.n"
    ).format(documents), {"config": config, "visible": list(visible), "words": terms}).fetchall()
    found: dict[str, Lexeme] = {}
    for word, lexeme, holding in rows:
        if not lexeme or int(holding) == 0:  # a stop word, or no visible document holds it
            continue
        weight = weights.get(word, 1.0)
        idf = math.log1p((n_documents - int(holding) + 0.5) / (int(holding) + 0.5))
        if lexeme not in found or weight > found[lexeme].weight:
            found[lexeme] = Lexeme(word, lexeme, weight, idf)
    return list(found.values())


def ranked(conn: psycopg.Connection, schema: str, config: str, words: Sequence[Lexeme], visible: Sequence[str],
           depth: int) -> list[Hit]:  # fmt: skip
    """The caller's `depth` best documents for `words`, best first (ties by url)."""
    if not words or depth <= 0:
        return []
    # One ts_rank per lexeme, each over the tsquery parsed once: PostgreSQL computes it for every matching
    # document, so nothing per row may be more than it must.
    terms = sql.SQL(" + ").join(
        sql.SQL("{} * ts_rank({}::float4[], d.tsv, {}::tsquery, {})").format(
            sql.Literal(w.weight * w.idf), sql.Literal(RANK_WEIGHTS), sql.Literal(w.query),
            sql.Literal(RANK_NORMALIZATION))
        for w in words
    )
    query = sql.SQL(
        "SELECT d.id, {columns}, {terms} AS score FROM {documents} d"
        " WHERE d.tsv @@ %(any)s::tsquery AND d.acl_tokens && %(visible)s::text[]"
        " ORDER BY score DESC, d.url LIMIT %(depth)s"
    ).format(columns=sql.SQL(", ").join(sql.Identifier("d", c) for c in _COLUMNS), terms=terms,
             documents=table(schema, "documents"))  # fmt: skip
    rows = conn.execute(query, {"any": " | ".join(f"({w.query})" for w in words), "visible": list(visible),
                                "depth": depth}).fetchall()  # fmt: skip
    return [Hit(int(row[0]), document(row[1:8]), float(row[8])) for row in rows]


def document(row: Sequence[Any]) -> SourceDocument:
    url, title, source, source_type, content, content_hash, metadata = row
    return SourceDocument(url=url, title=title, source=source, source_type=source_type, content=content,
                          content_hash=content_hash, metadata=without_meaning(json.loads(metadata)))  # fmt: skip


def stored_model(conn: psycopg.Connection, schema: str) -> str | None:
    """`vectors_key` of the model whose vectors the source holds (None: none were ever stored)."""
    row = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'vectors_model'").format(table(schema, "meta")))
    found = row.fetchone()
    return str(found[0]) if found else None


def stored_windows(conn: psycopg.Connection, schema: str, ids: Sequence[int],
                   query: NDArray[np.float32]) -> dict[int, list[Window]]:  # fmt: skip
    """(start, end, cosine to `query`) of each stored window of the documents `ids`, by document."""
    rows = conn.execute(sql.SQL(
        "SELECT document_id, span_start, span_end, vector FROM {} WHERE document_id = ANY(%s)"
        " ORDER BY document_id, ordinal"
    ).format(table(schema, "vectors")), (list(ids),)).fetchall()
    if not rows:
        return {}
    matrix = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype=np.float32).reshape(len(rows), -1)
    # Row by row (einsum, not BLAS's blocked gemv), so a window's cosine does not depend on its neighbours.
    cosines = np.einsum("ij,j->i", matrix, query.astype(np.float32))
    out: dict[int, list[Window]] = {}
    for (document_id, start, end, _), cosine in zip(rows, cosines, strict=True):
        out.setdefault(int(document_id), []).append((int(start), int(end), float(cosine)))
    return out
