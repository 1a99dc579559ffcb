"""From a passage's supported tokens to exact, unambiguous spans of the source text.

A supported run is a maximal stretch of passage tokens covered by n-grams the document has.
The run is located in the document as one or more *pieces* (stretches that occur contiguously);
when a piece occurs several times (repeated boilerplate, a table row copied twice), the
occurrences are chosen so that the pieces stay in passage order and as close together as
possible. evident/alignment/quote.py turns the chosen pieces into the quote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evident.alignment.overlap import PassageUnits, Segment
from evident.alignment.tokenize import DocumentIndex, token_string

MAX_OCCURRENCES = 64
_OUT_OF_ORDER = 10**9


@dataclass(frozen=True)
class Piece:
    """Passage tokens [p_first, p_last) found contiguously at candidate document tokens."""

    p_first: int
    p_last: int
    candidates: tuple[int, ...]


def occurrences(doc: DocumentIndex, tstring: str, limit: int = MAX_OCCURRENCES) -> list[int]:
    """Document token indices where the token sequence `tstring` starts."""
    out: list[int] = []
    pos = doc.tstring.find(tstring)
    while pos >= 0 and len(out) < limit:
        out.append(doc.token_at(pos + 1))
        pos = doc.tstring.find(tstring, pos + 1)
    return out


def covered_runs(units: PassageUnits, seg: Segment, avail: dict[str, int]) -> list[tuple[int, int]]:
    """Maximal runs [first, last) of segment tokens covered by units the document has.

    `avail` holds the document's remaining count per unit and is consumed, so a unit the passage
    repeats more often than the document has it covers only as many places as the document has.
    """
    n_tok = len(seg.tokens)
    covered = [False] * n_tok
    width = units.n if n_tok >= units.n else n_tok
    for start, unit in units.segment_units(seg):
        if avail.get(unit, 0) > 0:
            avail[unit] -= 1
            for k in range(start, start + width):
                covered[k] = True
    runs: list[tuple[int, int]] = []
    i = 0
    while i < n_tok:
        if covered[i]:
            j = i
            while j < n_tok and covered[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _longest_found(doc: DocumentIndex, toks: tuple[str, ...], lo: int, hi: int) -> int:
    """Largest end e in [lo, hi] such that toks[:e] occurs in the document (toks[:lo] does)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if token_string(toks[:mid]) in doc.tstring:
            lo = mid
        else:
            hi = mid - 1
    return lo


def pieces_of_run(doc: DocumentIndex, seg: Segment, run: tuple[int, int], n: int) -> list[Piece]:
    """Split a covered run into stretches that each occur contiguously in the document."""
    toks = seg.tokens
    first, last = run
    whole = token_string(toks[first:last])
    occ = occurrences(doc, whole)
    if occ:
        return [Piece(first, last, tuple(occ))]
    out: list[Piece] = []
    pos = first
    width = min(n, last - first)
    while pos < last:
        # Start the next piece at the earliest offset whose n-gram the document has, reaching
        # back into the previous piece so no covered token is lost; report only the new tokens.
        anchor = None
        for s in range(max(first, pos - width + 1), pos + 1):
            if token_string(toks[s : s + width]) in doc.tstring:
                anchor = s
                break
        if anchor is None:
            pos += 1
            continue
        end = _longest_found(doc, toks[anchor:last], width, last - anchor) + anchor
        if end <= pos:
            pos += 1
            continue
        skip = pos - anchor
        occ = occurrences(doc, token_string(toks[anchor:end]))
        out.append(Piece(pos, end, tuple(o + skip for o in occ)))
        pos = end
    return out


def choose_occurrences(pieces: list[Piece], unlike: Callable[[int, int, int], int] | None = None) -> list[int]:
    """Pick one occurrence per piece: in passage order, adjacent where possible, closest.

    Among placements equally close, `unlike(k, pc, c)` (piece k at c right after piece k - 1 at
    pc, with as many words between them as the passage has) breaks the tie: the source's words in
    that gap most like the passage's win ("375 days" is "365 days" rather than "5 days").
    """
    if not pieces:
        return []
    # best[k][c] = (cost, back-pointer) of ending piece k at candidate c.
    prev_cost: list[tuple[int, int]] = [(0, 0)] * len(pieces[0].candidates)
    backs: list[list[int]] = []
    for k in range(1, len(pieces)):
        prev, cur = pieces[k - 1], pieces[k]
        length = prev.p_last - prev.p_first
        gap_p = cur.p_first - prev.p_last
        costs: list[tuple[int, int]] = []
        back: list[int] = []
        for c in cur.candidates:
            best, arg = None, 0
            for j, pc in enumerate(prev.candidates):
                expected = pc + length + gap_p
                step = abs(c - expected) if c >= pc + length else _OUT_OF_ORDER + (pc - c)
                tie = unlike(k, pc, c) if unlike is not None and step == 0 and gap_p > 0 else 0
                total = (prev_cost[j][0] + step, prev_cost[j][1] + tie)
                if best is None or total < best:
                    best, arg = total, j
            costs.append(best if best is not None else (0, 0))
            back.append(arg)
        backs.append(back)
        prev_cost = costs
    idx = min(range(len(prev_cost)), key=lambda j: (prev_cost[j], pieces[-1].candidates[j]))
    chosen = [idx]
    for back in reversed(backs):
        idx = back[idx]
        chosen.append(idx)
    chosen.reverse()
    return [p.candidates[j] for p, j in zip(pieces, chosen, strict=False)]


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """`(start, end)` without the whitespace at either end of `text[start:end]`."""
    # isspace() is exactly what str.strip() removes, so spans satisfy text[s:e] == text[s:e].strip().
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
