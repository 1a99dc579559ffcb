"""The full-text search of a PostgreSQL source: the caller's best documents by weighted rank.

A question is its content words (`asking.weighted_terms`, as the embedded index reads it: greetings
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

Two things keep a search from growing with the corpus:
- The counts of the IDF (N, and each word's n) are cached per refresh generation and caller's token set
  (`VisibleCounts`): a refresh bumps the `generation` in `meta` in its transaction, and a search reads the
  generation, the counts and the documents in one snapshot (`snapshot`).
- `ts_rank` is computed for a bounded pool of candidates, not for every document holding any question
  word (`candidate_words`): the documents holding the question's rarest words, taken rarest first while
  their counts add up to at most `pool`. When every word fits, the pool is every match and the ranking is
  exact; otherwise a page holding only the question's commonest words, which weigh least, is not ranked.
  When even the rarest word alone has more documents than `pool`, the documents holding all of the fewest
  rarest words that together leave between the search's depth and `pool` of them are ranked
  (`together`): a page lacking one of the question's rarest words rarely outranks those holding them all.
  When no such words are found, a sample stands for the rarest word's documents (`sampled_share`): those
  whose url hashes below `pool / count` of the key range, found by an index (`schema.SAMPLE_KEY`), so the
  rows read stay near `pool` however common the word is. The pool is chosen from the caller's counts, the
  documents the caller may see and each document's own url only, so it too depends on nothing the caller
  may not see.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from evident.alignment.models import SourceDocument
from evident.connectors.postgres.schema import SAMPLE_KEY, SAMPLE_KEYS, table
from evident.conversation.asking import weighted_terms
from evident.embeddings.meaning import Window, without_meaning

# ts_rank's weights, in its order {D, C, B, A}: body, (unused), headings, title. PostgreSQL's default
# {0.1, 0.2, 0.4, 1.0} measured worst of those tried on the development set's tune part (recall @1/@3/@8
# 0.579/0.710/0.811 by words; these 0.639/0.779/0.869; docs/postgres.md).
RANK_WEIGHTS = [0.5, 0.2, 0.7, 1.0]
RANK_NORMALIZATION = 1  # divide by 1 + log(document length): a long page does not win by length alone
MAX_WORDS = 32  # a question's words searched at most: bounds the cost of one query
# The documents a search ranks at most (the `candidate_pool` setting; `candidate_words`): larger ranks more
# pages holding only common words, at a cost that grows with it (about 20 µs a document on 2 cores).
CANDIDATE_POOL = 10_000
# The most of the question's rarest words a search asks to be held together (`together`): each one more is
# one more count of up to `pool` documents, and past four a question's words are common ones.
TOGETHER_MAX = 4
# A search's memory per bitmap (the `work_mem_mb` setting): the bitmaps of a common word, of the caller's
# documents and of a sample (`ranked`) keep an entry of about 50 bytes per table page they touch (1,000,000
# sections: 191,000 pages); past PostgreSQL's default 4 MB they turn lossy, and every row of a lossy page is
# read and checked again (there: 3 times the rows, a sampled search 1.4 s instead of 0.3 s).
WORK_MEM_MB = 64
COUNTS_CACHED = 64  # (generation, token set) pairs whose counts are kept
WORDS_CACHED = 20_000  # words counted per pair at most; past it, that pair starts again

_COLUMNS = ("url", "title", "source", "source_type", "content", "content_hash", "metadata")


@dataclass(frozen=True)
class Lexeme:
    """One distinct lexeme of the question: a word that stands for it, its `websearch_to_tsquery`, its weight
    and its IDF."""

    word: str
    query: str
    weight: float
    idf: float
    holding: int  # the documents the caller may see that hold it


@dataclass(frozen=True)
class Hit:
    id: int
    doc: SourceDocument
    score: float


@dataclass
class _Counted:
    documents: int | None = None
    words: dict[str, tuple[str, int]] = field(default_factory=dict)  # word -> (its tsquery, n)


class VisibleCounts:
    """The IDF's counts over the documents a token set may see, per refresh generation: N, and per word its
    tsquery and n. A generation is never reused, so an entry is right for as long as it is found."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, frozenset[str]], _Counted] = {}
        self._lock = threading.Lock()

    def entry(self, generation: int | None, visible: Sequence[str]) -> _Counted:
        """The counts known for `visible` at `generation` (a fresh, unshared entry when it is None: tables
        written before generations were, counted every time)."""
        if generation is None:
            return _Counted()
        key = (generation, frozenset(visible))
        with self._lock:
            found = self._entries.get(key)
            if found is None or len(found.words) > WORDS_CACHED:
                if len(self._entries) >= COUNTS_CACHED:
                    self._entries.clear()
                found = self._entries[key] = _Counted()
            return found


@contextmanager
def snapshot(conn: psycopg.Connection, work_mem_mb: int = WORK_MEM_MB) -> Iterator[None]:
    """One read-only snapshot for a search: the generation read is the one its counts and documents are of.
    Its statements may use `work_mem_mb` of memory per sort or bitmap (0: the server's `work_mem`)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if work_mem_mb > 0:
            conn.execute("SELECT set_config('work_mem', %s, true)", (f"{work_mem_mb}MB",))
        yield


def generation(conn: psycopg.Connection, schema: str) -> int | None:
    """The source's refresh generation (None: tables from before it was kept)."""
    row = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'generation'").format(table(schema, "meta")))
    found = row.fetchone()
    return int(found[0]) if found else None


def lexemes(conn: psycopg.Connection, schema: str, config: str, query: str, visible: Sequence[str],
            counts: VisibleCounts | None = None) -> list[Lexeme]:  # fmt: skip
    """The question's distinct lexemes that some document the caller may see holds, with their IDF; the
    counts come from `counts` where it has them for the source's current generation (run in `snapshot`)."""
    terms, weights = weighted_terms(query)
    terms = terms[:MAX_WORDS]
    if not terms:
        return []
    documents = table(schema, "documents")
    known = (counts or VisibleCounts()).entry(generation(conn, schema), visible)
    if known.documents is None:
        total = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE acl_tokens && %s::text[]").format(documents),
                             (list(visible),)).fetchone()  # fmt: skip
        known.documents = int(total[0]) if total else 0
    missing = list(dict.fromkeys(t for t in terms if t not in known.words))
    if missing:
        rows = conn.execute(sql.SQL(
            "SELECT w.word, websearch_to_tsquery(%(config)s::regconfig, w.word)::text,"
            " (SELECT count(*) FROM {} d WHERE d.tsv @@ websearch_to_tsquery(%(config)s::regconfig, w.word)"
            "  AND d.acl_tokens && %(visible)s::text[])"
            " FROM unnest(%(words)s::text[]) AS w(word)"
        ).format(documents), {"config": config, "visible": list(visible), "words": missing}).fetchall()
        known.words.update({str(word): (str(lexeme), int(holding)) for word, lexeme, holding in rows})
    found: dict[str, Lexeme] = {}
    for word in terms:
        lexeme, holding = known.words[word]
        if not lexeme or holding == 0:  # a stop word, or no visible document holds it
            continue
        weight = weights.get(word, 1.0)
        idf = math.log1p((known.documents - holding + 0.5) / (holding + 0.5))
        if lexeme not in found or weight > found[lexeme].weight:
            found[lexeme] = Lexeme(word, lexeme, weight, idf, holding)
    return list(found.values())


def candidate_words(words: Sequence[Lexeme], pool: int) -> list[Lexeme]:
    """The words whose documents are the candidates: the rarest first while their counts add up to at most
    `pool`, and at least the rarest; all of them when `pool` is 0. Their counts bound the pool's size
    from above (a document holding two of them is counted twice)."""
    rarest = sorted(words, key=lambda w: (w.holding, w.query))
    if pool <= 0:
        return rarest
    chosen: list[Lexeme] = []
    total = 0
    for word in rarest:
        total += word.holding
        if chosen and total > pool:
            break
        chosen.append(word)
    return chosen


def sampled_share(words: Sequence[Lexeme], pool: int) -> float:
    """The share of the candidate words' documents a search ranks: 1 where their counts fit in `pool` (or
    `pool` is 0: every match), else `pool` over their count, which happens only when the rarest word alone
    holds more documents than `pool` (`candidate_words`)."""
    holding = sum(w.holding for w in words)
    return 1.0 if pool <= 0 or holding <= pool else pool / holding


def ranked(conn: psycopg.Connection, schema: str, config: str, words: Sequence[Lexeme], visible: Sequence[str],
           depth: int, pool: int = CANDIDATE_POOL) -> list[Hit]:  # fmt: skip
    """The caller's `depth` best documents for `words` among the candidates of `pool` (`candidate_words`,
    `together`, `sampled_share`), best first (ties by url). A sample holding fewer than `depth` of the
    caller's documents is widened fourfold until it holds them or is whole, so a search never comes back
    short."""
    if not words or depth <= 0:
        return []
    candidates = candidate_words(words, pool)
    share = sampled_share(candidates, pool)
    if share < 1.0:
        rarest = together(conn, schema, words, visible, depth, pool)
        if rarest:
            return _ranked(conn, schema, words, rarest, visible, depth, 1.0, every=True)
    while True:
        hits = _ranked(conn, schema, words, candidates, visible, depth, share)
        if len(hits) >= depth or share >= 1.0:
            return hits
        share = min(1.0, share * 4)


def together(conn: psycopg.Connection, schema: str, words: Sequence[Lexeme], visible: Sequence[str], depth: int,
             pool: int) -> list[Lexeme]:  # fmt: skip
    """The fewest of the question's rarest words (two to TOGETHER_MAX of them, rarest first) that the caller's
    documents hold all together in at most `pool` documents, when those are at least `depth`; [] otherwise.
    Each count stops at `pool + 1` documents, and each word more reads one more word's index entries, so a
    try costs about what ranking `pool` documents does."""
    rarest = sorted(words, key=lambda w: (w.holding, w.query))
    query = sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM {documents} d WHERE d.tsv @@ %(all)s::tsquery"
        " AND d.acl_tokens && %(visible)s::text[] LIMIT %(limit)s) holding"
    ).format(documents=table(schema, "documents"))
    for n in range(2, min(len(rarest), TOGETHER_MAX) + 1):
        row = conn.execute(query, {"all": " & ".join(f"({w.query})" for w in rarest[:n]), "visible": list(visible),
                                   "limit": pool + 1}).fetchone()  # fmt: skip
        holding = int(row[0]) if row else 0
        if holding <= pool:
            return rarest[:n] if holding >= depth else []
    return []


def _ranked(conn: psycopg.Connection, schema: str, words: Sequence[Lexeme], candidates: Sequence[Lexeme],
            visible: Sequence[str], depth: int, share: float, every: bool = False) -> list[Hit]:  # fmt: skip
    """The ranking over the documents holding any of `candidates` (`every`: all of them), in a sample of
    `share` of them."""
    # One ts_rank per lexeme, each over the tsquery parsed once: PostgreSQL computes it for every matching
    # document, so nothing per row may be more than it must.
    terms = sql.SQL(" + ").join(
        sql.SQL("{} * ts_rank({}::float4[], d.tsv, {}::tsquery, {})").format(
            sql.Literal(w.weight * w.idf), sql.Literal(RANK_WEIGHTS), sql.Literal(w.query),
            sql.Literal(RANK_NORMALIZATION))
        for w in words
    )
    sample = (sql.SQL(" AND {} < {}").format(sql.SQL(SAMPLE_KEY.format(url="d.url")),
                                             sql.Literal(int(share * SAMPLE_KEYS)))
              if share < 1.0 else sql.SQL(""))  # fmt: skip
    query = sql.SQL(
        "SELECT d.id, {columns}, {terms} AS score FROM {documents} d"
        " WHERE d.tsv @@ %(any)s::tsquery AND d.acl_tokens && %(visible)s::text[]{sample}"
        " ORDER BY score DESC, d.url LIMIT %(depth)s"
    ).format(columns=sql.SQL(", ").join(sql.Identifier("d", c) for c in _COLUMNS), terms=terms,
             documents=table(schema, "documents"), sample=sample)  # fmt: skip
    joiner = " & " if every else " | "
    rows = conn.execute(query, {"any": joiner.join(f"({w.query})" for w in candidates), "visible": list(visible),
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
