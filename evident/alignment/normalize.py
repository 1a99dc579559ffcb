"""Text normalisation that never loses track of the original characters.

Alignment compares NFKC, case-folded text, but every span it reports must point into the
*original* document. `normalize_with_map` therefore returns the normalised text together with an
`OffsetMap` that turns any normalised offset back into an original one.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

# Characters that are invisible in rendered text and that extractors routinely drop or add:
# soft hyphen, zero-width space/non-joiner/joiner, word joiner, BOM. They must not split or
# block a match, so normalisation deletes them.
IGNORABLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_IGNORABLE_RE = re.compile(f"[{IGNORABLE}]")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


def nfkc_casefold(text: str) -> str:
    """NFKC + case folding with ignorable characters removed (the comparison form)."""
    if text.isascii():
        return text.lower()
    if _IGNORABLE_RE.search(text):
        text = _IGNORABLE_RE.sub("", text)
    # Case folding can produce characters that are not NFKC-normal (e.g. U+0130), hence twice.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


@dataclass(frozen=True, slots=True)
class OffsetMap:
    """Maps offsets of a normalised text back to the original.

    Between the recorded pieces the two texts advance together; a piece is a stretch whose
    length changed (a ligature expanded, an ignorable removed, a combining sequence composed),
    and offsets inside it snap to the piece's boundaries, so spans always cover whole characters.
    """

    norm_starts: tuple[int, ...] = ()
    norm_ends: tuple[int, ...] = ()
    orig_starts: tuple[int, ...] = ()
    orig_ends: tuple[int, ...] = ()

    def start(self, pos: int) -> int:
        i = bisect_right(self.norm_starts, pos) - 1
        if i < 0:
            return pos
        if pos < self.norm_ends[i]:
            return self.orig_starts[i]
        return self.orig_ends[i] + (pos - self.norm_ends[i])

    def end(self, pos: int) -> int:
        i = bisect_left(self.norm_starts, pos) - 1
        if i < 0:
            return pos
        if pos <= self.norm_ends[i]:
            return self.orig_ends[i]
        return self.orig_ends[i] + (pos - self.norm_ends[i])


IDENTITY = OffsetMap()


def _clusters(run: str) -> list[str]:
    """Split into base character + following combining marks, the unit NFKC composes."""
    out: list[str] = []
    for ch in run:
        if out and unicodedata.combining(ch):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def normalize_with_map(text: str) -> tuple[str, OffsetMap]:
    """Return `(nfkc_casefold(text), map back to text)`.

    ASCII text (the common case for enterprise pages) costs one `str.lower()`; only runs of
    non-ASCII characters are examined one cluster at a time.
    """
    if text.isascii():
        return text.lower(), IDENTITY
    parts: list[str] = []
    ns: list[int] = []
    ne: list[int] = []
    os_: list[int] = []
    oe: list[int] = []
    norm_len = 0
    cursor = 0
    for m in _NON_ASCII_RUN.finditer(text):
        start, end = m.start(), m.end()
        run = text[start:end]
        whole = nfkc_casefold(run)
        # A combining mark composes with the ASCII letter before it ("e" + U+0301 -> "é"), and so
        # does a character whose normal form *starts* with one (halfwidth U+FF9E -> U+3099).
        if start > cursor and (
            unicodedata.combining(text[start]) or (whole and unicodedata.combining(whole[0]))
        ):
            start -= 1
            run = text[start:end]
            whole = nfkc_casefold(run)
        if start > cursor:
            chunk = text[cursor:start].lower()
            parts.append(chunk)
            norm_len += len(chunk)
        pieces = [(c, nfkc_casefold(c)) for c in _clusters(run)]
        if "".join(p for _, p in pieces) != whole:
            # Normalisation crossed cluster boundaries (e.g. Hangul jamo): one atomic piece.
            pieces = [(run, whole)]
        o = start
        for orig, norm in pieces:
            if len(orig) != len(norm):
                ns.append(norm_len)
                ne.append(norm_len + len(norm))
                os_.append(o)
                oe.append(o + len(orig))
            parts.append(norm)
            norm_len += len(norm)
            o += len(orig)
        cursor = end
    if cursor < len(text):
        parts.append(text[cursor:].lower())
    return "".join(parts), OffsetMap(tuple(ns), tuple(ne), tuple(os_), tuple(oe))
