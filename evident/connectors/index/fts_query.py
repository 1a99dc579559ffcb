"""The FTS5 fallback of the embedded index: its search while the Tantivy directory cannot be trusted.

`fts_search` is reached from one place only, `LocalIndex._lexical`, when `MirroredStore._mirror_hits` has no
Tantivy answer: the directory is missing, stale (another process committed SQLite and not yet its mirror,
or an index opened read-only before a writable open rebuilt it) or damaged and not rebuilt (docs/sources.md,
"Words and scores"). It searches the same words as every engine (`asking.search_terms`); FTS5 stems them
with its porter tokenizer, the one its table was built with.

User questions contain FTS5 syntax by accident ("AND", "NEAR", quotes, `*`, `:`, parentheses);
passed through, they either raise a syntax error or silently change the meaning. Every word is
therefore quoted as a string (FTS5 then treats it purely as text for its own tokenizer) and the
words are OR-ed, leaving the ranking to BM25.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from evident.connectors.index.visible_ranking import TIE_MARGIN
from evident.conversation.asking import search_terms


def fts_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression for `text`, or None when it has no searchable word."""
    terms = search_terms(text)
    if not terms:
        return None
    # A word is word characters only, never '"', so quoting needs no escaping.
    return " OR ".join(f'"{term}"' for term in terms)


def fts_search(
    conn: sqlite3.Connection,
    text: str,
    k: int,
    *,
    columns: str,
    title_weight: float,
    content_weight: float,
    visible: Sequence[str] | None = None,
) -> list[tuple[Any, ...]]:
    """The `k` best `documents` rows (`columns` then score) by FTS5 BM25, ties by url; with `visible`,
    among the documents holding one of those visibility tokens (`document_visibility`) only.

    The embedded index ranks with Tantivy; this is its fallback while the Tantivy directory cannot
    be trusted (e.g. an index opened read-only before its first writable open rebuilt it). It scores
    single words only: the word-proximity clauses, the misspelling repairs and the IDF floor of
    `ranking.TantivyMirror` have no FTS5 counterpart here. FTS5's `bm25()` takes its statistics (N,
    document frequencies, average length) from the whole table, hidden documents included: only the
    Tantivy search counts the visible documents alone (docs/security.md).
    """
    expression = fts_match_expression(text)
    if expression is None or k <= 0:
        return []
    score = f"-bm25(documents_fts, {title_weight}, {content_weight})"
    # The filter is part of the WHERE, before ORDER BY ... LIMIT: the k best are the k best visible ones.
    seen, tokens = "", list(visible or ())
    if visible is not None:
        marks = ", ".join("?" for _ in tokens) or "NULL"
        seen = f" AND documents_fts.rowid IN (SELECT document_id FROM document_visibility WHERE token IN ({marks}))"
    # Rank on the full-text index alone, then read only the winners' rows: joining first carries
    # every matching document's text through the sort, which doubles the time on large indexes.
    ranked_sql = f"SELECT rowid, {score} AS score FROM documents_fts WHERE documents_fts MATCH ?{seen}" \
        " ORDER BY score DESC LIMIT ?"
    ranked = conn.execute(ranked_sql, (expression, *tokens, k + TIE_MARGIN)).fetchall()
    if len(ranked) == k + TIE_MARGIN and ranked[k - 1][1] == ranked[-1][1]:
        # Rows tied with the k-th may lie beyond what was fetched; the order (score, then URL)
        # needs the URLs of all of them.
        by_url = f"""
            SELECT {", ".join("d." + c.strip() for c in columns.split(","))}, {score} AS score
            FROM documents_fts JOIN documents AS d ON d.id = documents_fts.rowid
            WHERE documents_fts MATCH ?{seen} ORDER BY score DESC, d.url LIMIT ?
        """
        return list(conn.execute(by_url, (expression, *tokens, k)).fetchall())
    # Rows tied with the k-th row compete for the last places by URL: read them all.
    cut = ranked[k - 1][1] if len(ranked) >= k else None
    scores = {row_id: value for row_id, value in ranked if cut is None or value >= cut}
    if not scores:
        return []
    marks = ", ".join("?" for _ in scores)
    found = conn.execute(f"SELECT id, {columns} FROM documents WHERE id IN ({marks})", list(scores)).fetchall()
    return sorted((row[1:] + (scores[row[0]],) for row in found), key=lambda r: (-r[-1], r[0]))[:k]
