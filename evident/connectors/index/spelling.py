"""Misspelled query words: the indexed word that a word no document holds was most likely meant to be.

People type "plann", "resitrction", "Coivd"; no page holds them, so BM25 drops the very word the
question turns on. They are repaired against the index's own vocabulary (its stemmed terms), not a
dictionary: an enterprise corpus names its own products and forms. The candidates are generated from
the word (a few hundred document-frequency lookups), so the cost does not grow with the vocabulary.
Framework-free.
"""

from __future__ import annotations

from collections.abc import Callable
from string import ascii_lowercase

# A query word no document holds is searched as the indexed term closest to it, when its stem has at
# least REPAIR_MIN_LENGTH letters: one slip away (a letter dropped, added, or swapped with its
# neighbour), or, from REPAIR_LONG_LENGTH letters on, two (two dropped or swapped, or a letter typed
# out of place: "resitrct" for "restrict"). A replaced letter is no slip here: it mostly makes another
# real word that the corpus lacks ("spent" is not "spend", "stock" not "stuck"), and so does a slip in
# the first two letters ("seven" is not "even", "airline" not "hairline"). Shorter stems are left
# alone ("dig" is not "did"). The most common of the nearest terms wins, weighted REPAIR_WEIGHT x the
# word's weight: a guess counts less than what was written (at 1.0, "robot" searched as "root" cost a
# question; docs/evaluation.md, "How the offline engine decides").
REPAIR_MIN_LENGTH = 5
REPAIR_LONG_LENGTH = 8
REPAIR_WEIGHT = 0.7
# Candidates grow with the square of a word's length (two slips: about 4n² strings of n letters), so
# longer "words" are left alone: no real word this long is mistyped into one no page holds, and a
# query of junk words (up to 64 letters each, the analyzer's limit) would otherwise cost ~1 s per
# search. REPAIRS_PER_QUERY bounds the lookups of one query the same way.
REPAIR_MAX_LENGTH = 20
REPAIRS_PER_QUERY = 8


def _dropped_or_swapped(word: str) -> set[str]:
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    dropped = {head + tail[1:] for head, tail in splits if tail}
    swapped = {head + tail[1] + tail[0] + tail[2:] for head, tail in splits if len(tail) > 1}
    return dropped | swapped


def one_slip(word: str) -> set[str]:
    """Every string one slip from `word`: a letter dropped, two neighbours swapped, a letter added."""
    letters = sorted(set(ascii_lowercase) | set(word))
    added = {word[:i] + letter + word[i:] for i in range(len(word) + 1) for letter in letters}
    return (_dropped_or_swapped(word) | added) - {word}


def two_slips(word: str) -> set[str]:
    """Strings two slips from `word` without adding a new letter: two letters dropped or swapped,
    or one letter moved elsewhere."""
    out = {twice for once in _dropped_or_swapped(word) for twice in _dropped_or_swapped(once)}
    for i, letter in enumerate(word):
        rest = word[:i] + word[i + 1 :]
        out.update(rest[:j] + letter + rest[j:] for j in range(len(rest) + 1))
    return out - {word}


def repair(token: str, document_count: Callable[[str], int]) -> str | None:
    """The indexed term (`document_count` > 0) nearest to `token` and starting like it (see
    REPAIR_MIN_LENGTH), the most common among equally near ones (ties by the term itself); None when
    none is near enough, or when `token` is shorter than REPAIR_MIN_LENGTH or longer than
    REPAIR_MAX_LENGTH."""
    if not REPAIR_MIN_LENGTH <= len(token) <= REPAIR_MAX_LENGTH:
        return None
    rounds = [one_slip(token)]
    if len(token) >= REPAIR_LONG_LENGTH:
        rounds.append(two_slips(token) - rounds[0])
    for candidates in rounds:
        kept = (candidate for candidate in candidates if candidate[:2] == token[:2])
        found = [(count, candidate) for candidate in kept if (count := document_count(candidate)) > 0]
        if found:
            return min(found, key=lambda hit: (-hit[0], hit[1]))[1]
    return None
