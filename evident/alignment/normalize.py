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


def _has_ignorable(text: str) -> bool:
    return any(ch in text for ch in IGNORABLE)  # six fast substring searches beat one regex scan
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


def nfkc_casefold(text: str) -> str:
    """NFKC + case folding with ignorable characters removed (the comparison form)."""
    if text.isascii():
        return text.lower()
    if _has_ignorable(text):
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

    ASCII text (the common case for enterprise pages) costs one `str.lower()`. Otherwise, in
    order: text that is already NFKC and case-folds character for character keeps its offsets;
    a long text whose every non-ASCII character normalises independently of its neighbours is
    mapped character by character in vectorised steps; anything else (combining marks, Hangul
    jamo, ...) goes through the exact run-by-run path.
    """
    if text.isascii():
        return text.lower(), IDENTITY
    if unicodedata.is_normalized("NFKC", text) and not _has_ignorable(text):
        # Already NFKC (curly quotes, accented letters, most non-Latin text): if case folding
        # maps every character to exactly one and leaves the text NFKC, offsets do not move.
        folded = text.casefold()
        if len(folded) == len(text) and unicodedata.is_normalized("NFKC", folded):
            return folded, IDENTITY
    if len(text) >= VECTORISE_MIN_CHARS:
        found = normalize_vectorised(text)
        if found is not None:
            return found
    return normalize_runs(text)


VECTORISE_MIN_CHARS = 2048
_COMPOSES_AFTER: frozenset[str] | None = None
_FORMS: dict[int, str | None] = {}


def _composes_after() -> frozenset[str]:
    """Starters (combining class 0) that canonical composition merges into the character before.

    Hangul vowel and trailing jamo, and a few vowel signs (Bengali, Oriya, Tamil, Kannada, ...):
    the second character of every two-character canonical decomposition that is not a combining
    mark. Read from the Unicode data once (about 35 ms), so it follows Python's Unicode version.
    """
    global _COMPOSES_AFTER
    if _COMPOSES_AFTER is None:
        found = {chr(c) for c in range(0x1161, 0x1176)} | {chr(c) for c in range(0x11A8, 0x11C3)}
        decomposition, combining = unicodedata.decomposition, unicodedata.combining
        for cp in range(0x80, 0x20000):  # no canonical pair decomposes beyond plane 1
            d = decomposition(chr(cp))
            if d and d[0] != "<":
                pair = d.split()
                if len(pair) == 2 and not combining(second := chr(int(pair[1], 16))):
                    found.add(second)
        _COMPOSES_AFTER = frozenset(found)
    return _COMPOSES_AFTER


def _form(cp: int) -> str | None:
    """`nfkc_casefold(chr(cp))` if that character normalises the same whatever surrounds it.

    True when neither the character nor the start of its NFKC and case-folded forms can combine
    with what precedes it (a combining mark, or a starter that composes after another), and
    nothing can combine with it except combining marks, which are never context-free themselves.
    Then the normal form of a text of such characters is the concatenation of theirs.
    """
    if cp in _FORMS:
        return _FORMS[cp]
    ch = chr(cp)
    after = _composes_after()
    result: str | None = None
    if ch in IGNORABLE:
        result = ""
    elif not unicodedata.combining(ch) and ch not in after:
        nfkc = unicodedata.normalize("NFKC", ch)
        folded = nfkc.casefold()
        if all(not s or (not unicodedata.combining(s[0]) and s[0] not in after) for s in (nfkc, folded)):
            result = unicodedata.normalize("NFKC", folded)
    _FORMS[cp] = result
    return result


def normalize_vectorised(text: str) -> tuple[str, OffsetMap] | None:
    """`normalize_with_map` for text whose non-ASCII characters are all context-free, else None."""
    # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
    import numpy as np

    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    high = np.flatnonzero(cps > 127)
    distinct, which = np.unique(cps[high], return_inverse=True)
    forms: list[str] = []
    for cp in distinct.tolist():
        form = _form(cp)
        if form is None:
            return None
        forms.append(form)
    # ASCII upper case to lower case: +32 where 65 <= cp <= 90 (unsigned wrap-around test)
    out = cps + (((cps - np.uint32(65)) < np.uint32(26)).astype(np.uint32) << np.uint32(5))
    lengths = np.fromiter((len(f) for f in forms), dtype=np.int64, count=len(forms))
    single = np.fromiter((ord(f) if len(f) == 1 else 0 for f in forms), dtype=np.uint32, count=len(forms))
    one = lengths[which] == 1
    out[high[one]] = single[which[one]]
    if one.all():
        return out.tobytes().decode("utf-32-le", "surrogatepass"), IDENTITY
    # Some characters change length (a ligature expands, an ignorable disappears): lay the
    # output out by cumulative lengths and record each such character as a piece.
    special = high[~one]
    special_forms = which[~one]
    special_sizes = lengths[special_forms]
    grown = special_sizes - 1
    ns = special + np.cumsum(grown) - grown  # where each special character's form starts
    chunks = []
    prev = 0
    for pos, k in zip(special.tolist(), special_forms.tolist(), strict=False):
        chunks.append(out[prev:pos])
        chunks.append(np.fromiter(map(ord, forms[k]), dtype=np.uint32, count=len(forms[k])))
        prev = pos + 1
    chunks.append(out[prev:])
    res = np.concatenate(chunks)  # an ignorable vanishes, a ligature takes its form's length
    omap = OffsetMap(
        tuple(ns.tolist()), tuple((ns + special_sizes).tolist()), tuple(special.tolist()),
        tuple((special + 1).tolist()),
    )
    return res.tobytes().decode("utf-32-le", "surrogatepass"), omap


def normalize_runs(text: str) -> tuple[str, OffsetMap]:
    """The exact path: runs of non-ASCII characters, one cluster at a time."""
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
        cursor = end
        if len(whole) == len(run) and unicodedata.is_normalized("NFKC", run) and whole == run.casefold():
            # Character for character (a curly quote, "é", a Cyrillic word): no piece to record.
            parts.append(whole)
            norm_len += len(whole)
            continue
        pieces = [(c, nfkc_casefold(c)) for c in _clusters(run)]
        atomic = "".join(p for _, p in pieces) != whole
        if atomic:
            # Normalisation crossed cluster boundaries (Hangul jamo, marks reordered across an
            # ignorable): one piece, recorded even at equal length, as its characters moved.
            pieces = [(run, whole)]
        o = start
        for orig, norm in pieces:
            if len(orig) != len(norm) or atomic:
                ns.append(norm_len)
                ne.append(norm_len + len(norm))
                os_.append(o)
                oe.append(o + len(orig))
            parts.append(norm)
            norm_len += len(norm)
            o += len(orig)
    if cursor < len(text):
        parts.append(text[cursor:].lower())
    return "".join(parts), OffsetMap(tuple(ns), tuple(ne), tuple(os_), tuple(oe))
