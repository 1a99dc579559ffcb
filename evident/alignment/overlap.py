"""The paper's n-gram overlap measure, and a passage's n-gram "units".

`overlap_n(p, d) = |G_n(p) ∩ G_n(d)| / |G_n(p)|` with G_n the *multiset* of word n-grams
(EvidenT §3.3, Eq. 1). A passage shorter than n tokens has no n-gram; it counts as supported
(overlap 1) exactly when its whole token sequence occurs in the document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

from evident.alignment.tokenize import Tokens, token_string, tokenize, words

# "…", "...", and the bracketed forms editors use ("[...]", "[…]") mark omitted text.
ELLIPSIS = re.compile(r"\[\s*(?:…|\.{3,})\s*\]|…|\.{3,}")


def ngrams(tokens: list[str] | tuple[str, ...], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def overlap_n(passage: str, document: str, n: int = 5) -> float:
    """The reference definition, computed the obvious way (used by tests and the benchmark)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return overlap_tokens(words(passage), words(document), n)


def overlap_tokens(p: list[str], d: list[str], n: int) -> float:
    """`overlap_n` on token lists already normalised."""
    if not p:
        return 0.0
    if len(p) < n:
        return 1.0 if token_string(p) in token_string(d) else 0.0
    gp, gd = ngrams(p, n), ngrams(d, n)
    return sum(min(c, gd[g]) for g, c in gp.items()) / sum(gp.values())


@dataclass(frozen=True)
class Segment:
    """A stretch of the passage between ellipses, with its tokens."""

    tokens: tuple[str, ...]
    first: int  # index of the segment's first token in the passage's token list

    @cached_property
    def tstring(self) -> str:
        return token_string(self.tokens)


@dataclass(frozen=True)
class PassageUnits:
    """What must be found in a document for a passage to count as supported.

    Units are the n-grams of every segment with at least n tokens, and the whole token string of
    every shorter segment; `overlap` is the share of units the document has (multiset-wise).
    """

    tokens: Tokens
    segments: tuple[Segment, ...]
    n: int
    units: Counter[str]  # token string of each n-gram / short segment -> multiplicity

    @property
    def total(self) -> int:
        return sum(self.units.values())

    def overlap(self, doc_counts: dict[str, int]) -> float:
        total = self.total
        if not total:
            return 0.0
        return sum(min(c, doc_counts.get(u, 0)) for u, c in self.units.items()) / total

    def segment_units(self, seg: Segment) -> list[tuple[int, str]]:
        """(start token within the segment, unit string) for each unit of the segment."""
        toks, n = seg.tokens, self.n
        if len(toks) < n:
            return [(0, seg.tstring)] if toks else []
        # Each n-gram's token string is a slice of the segment's: from the space before its first
        # token to the space after its last (pos[i] is the space before token i).
        ts = seg.tstring
        pos = list(accumulate((len(t) + 1 for t in toks), initial=0))
        return [(i, ts[pos[i] : pos[i + n] + 1]) for i in range(len(toks) - n + 1)]


def passage_units(content: str, n: int) -> PassageUnits:
    toks = tokenize(content)
    cuts = [m.start() for m in ELLIPSIS.finditer(content)]
    segments: list[Segment] = []
    bucket: list[str] = []
    first = 0
    cut_i = 0
    for i, (tok, start) in enumerate(zip(toks.tokens, toks.starts, strict=True)):
        if cut_i < len(cuts) and start >= cuts[cut_i]:
            while cut_i < len(cuts) and start >= cuts[cut_i]:
                cut_i += 1
            if bucket:
                segments.append(Segment(tuple(bucket), first))
            bucket, first = [], i
        bucket.append(tok)
    if bucket:
        segments.append(Segment(tuple(bucket), first))
    units: Counter[str] = Counter()
    pu = PassageUnits(toks, tuple(segments), n, units)
    for seg in segments:
        units.update(u for _, u in pu.segment_units(seg))
    return pu
