"""Turn arbitrary user text into a safe SQLite FTS5 MATCH expression.

User questions contain FTS5 syntax by accident ("AND", "NEAR", quotes, `*`, `:`, parentheses);
passed through, they either raise a syntax error or silently change the meaning. Every word is
therefore quoted as a string (FTS5 then treats it purely as text for its own tokenizer) and the
words are OR-ed, leaving the ranking to BM25.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from evident.alignment.tokenize import bmp_word_pattern
from evident.conversation.asking import CHAT, message_words

MAX_TERMS = 64  # enough for any real question; keeps a pasted 100 KB document fast to search
_TIE_MARGIN = 64  # extra ranked rows read so that ties at the k-th place are usually resolved in one go
MAX_TERM_LENGTH = 64  # longer "words" are hashes, base64 or junk, and cannot match usefully

# Deliberately small: BM25 already discounts common words, this only keeps a question's glue words
# from matching every document. Negations and question words that carry meaning are not here.
STOPWORDS = frozenset(
    """
    a an and are as at be been being but by can could did do does doing for from had has have having
    he her hers him his how i if in into is it its itself me my of on or our ours she so than that the
    their theirs them then there these they this those to too us was we were what when where which
    while who whom why will with would you your yours
    """.split()
)


def query_terms(text: str) -> list[str]:
    """Distinct, case-folded content words of `text`, in order of first appearance."""
    terms: list[str] = []
    seen: set[str] = set()
    # Words as the aligner reads them: Python's \w plus combining marks, which \w alone lacks and
    # which would cut Devanagari or Thai words at every vowel sign. The index's tokenizers (FTS5
    # unicode61, Tantivy's `\w+`) keep marks inside words too; where they still differ, a mismatch
    # only loosens the match, never breaks the query.
    for match in bmp_word_pattern().finditer(text):
        term = match.group().casefold()
        if term in seen or term in STOPWORDS or len(term) > MAX_TERM_LENGTH:
            continue
        seen.add(term)
        terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    return terms


# The least a searched word's IDF weighs in the Tantivy search (`ranking.TantivyMirror`). FTS5's
# ln(x) reaches 0 at half the documents (floored at 1e-6), so in a corpus about one thing its own
# words ("benefits" in 174 of doc2dial's 273 pages, "disability" in 135) counted for nothing: "What
# will the benefits planner used for?" was a search for "planner" alone, and the page holding every
# word of it ranked below the top 50. Floored, such a word still separates the pages that hold it
# from those that do not (docs/evaluation.md, rule 53; swept 0.02 to 0.5: retrieval gains up to 0.3,
# but from 0.1 on an example question's unanswerable abstention is lost, "employee" in 17 of 35
# pages then counting).
IDF_FLOOR = 0.08

# A searchable word the message analysis does not weigh (a negation, "after", "all"): it still
# counts, but less than the topic words of the question.
UNWEIGHED = 0.3


def weighted_terms(text: str) -> tuple[list[str], dict[str, float]]:
    """`query_terms(text)` without the words of greetings and requests, each with its weight from
    the message analysis (the asking part above the scenario, see `evident.conversation.asking.message_words`).
    A message of nothing but such words keeps all its terms at weight 1."""
    terms = query_terms(text)
    message = message_words(text)
    weights = {t: message.get(t, 0.0 if t in CHAT or (len(t) == 1 and not t.isdigit()) else UNWEIGHED) for t in terms}
    kept = [t for t in terms if weights[t] > 0]
    if not kept:
        return terms, {t: 1.0 for t in terms}
    return kept, weights


def fts_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression for `text`, or None when it has no searchable word."""
    terms = query_terms(text)
    if not terms:
        return None
    # \w never matches '"', so quoting needs no escaping.
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
    ranked = conn.execute(ranked_sql, (expression, *tokens, k + _TIE_MARGIN)).fetchall()
    if len(ranked) == k + _TIE_MARGIN and ranked[k - 1][1] == ranked[-1][1]:
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
