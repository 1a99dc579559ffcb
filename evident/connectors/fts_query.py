"""Turn arbitrary user text into a safe SQLite FTS5 MATCH expression.

User questions contain FTS5 syntax by accident ("AND", "NEAR", quotes, `*`, `:`, parentheses);
passed through, they either raise a syntax error or silently change the meaning. Every word is
therefore quoted as a string (FTS5 then treats it purely as text for its own tokenizer) and the
words are OR-ed, leaving the ranking to BM25.
"""

from __future__ import annotations

import re

# Python's \w is letters, digits and underscore in every script, close to the unicode61 tokenizer's
# token characters; where they differ (underscore, combining marks), the quoted term is re-tokenized
# by FTS5 itself into a phrase, so a mismatch only loosens the match, never breaks the query.
_WORD = re.compile(r"\w+")

MAX_TERMS = 64  # enough for any real question; keeps a pasted 100 KB document fast to search
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
    for match in _WORD.finditer(text):
        term = match.group().casefold()
        if term in seen or term in STOPWORDS or len(term) > MAX_TERM_LENGTH:
            continue
        seen.add(term)
        terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    return terms


def fts_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression for `text`, or None when it has no searchable word."""
    terms = query_terms(text)
    if not terms:
        return None
    # \w never matches '"', so quoting needs no escaping.
    return " OR ".join(f'"{term}"' for term in terms)
