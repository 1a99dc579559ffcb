"""From a passage's supported tokens to its quote: exact source spans, substitutions, completeness.

The supported runs of a passage are located in the document (evident/alignment/spans.py) and
merged into *stretches*, contiguous regions of the source. Inside a stretch, a difference of at
most `bridge` tokens on each side between two located pieces (a changed number, a changed name, a
dropped "not") is a *substitution*: the quote shows the source's tokens and the decision records
both. The same holds at the edges of a passage segment, where the words before or after a
substitution are too few to form an n-gram of their own: they must match the source exactly, and
a substitution at the very edge is accepted only between numbers.

Stretches are joined into one quote only where they read as one statement in the source
(evident/alignment/statement.py); otherwise the best-supported group alone is the quote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache

from evident.alignment.models import Substitution
from evident.alignment.overlap import ELLIPSIS, PassageUnits
from evident.alignment.spans import Piece, choose_occurrences, covered_runs, pieces_of_run
from evident.alignment.statement import breaks_statement, reads_as_one_statement
from evident.alignment.tokenize import DocumentIndex

# Characters trimmed from the ends of a substitution's text: markup and sentence punctuation that
# belong to the surrounding text rather than to the changed words.
_TRIM = " \t\r\n.,;:!?()[]{}\"'“”‘’*_`<>|"
_WIDEN = 16  # a substitution grows to whole whitespace-delimited words ("123,000"), this far at most


@dataclass
class Stretch:
    """Segment tokens [p_first, p_last) shown as document tokens [d_first, d_last)."""

    seg: int
    p_first: int
    p_last: int
    d_first: int
    d_last: int
    # (passage first, passage last, document first, document last) of each substitution.
    subs: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Quote:
    """Where a passage's quote lies in one document, and how it differs from the passage."""

    spans: list[tuple[int, int]]
    substitutions: list[Substitution]
    complete: bool  # every passage token is in the quote (matched or substituted)


def _one_statement(doc: DocumentIndex, last: int, first: int) -> bool:
    """Whether document tokens `last` and `first` (> last) read as one statement (no block break...)."""
    return reads_as_one_statement(doc.text, doc.span(last, last + 1)[1], doc.span(first, first + 1)[0],
                                  first - last - 1)


def _merge(seg: int, seg_len: int, pieces: list[Piece], starts: list[int], bridge: int, doc: DocumentIndex,
           n: int) -> list[Stretch]:
    out: list[Stretch] = []
    for piece, start in zip(pieces, starts, strict=False):
        st = Stretch(seg, piece.p_first, piece.p_last, start, start + (piece.p_last - piece.p_first))
        _trim(st, seg_len, doc, n)
        p_first, p_last, d_first, d_last = st.p_first, st.p_last, st.d_first, st.d_last
        if out:
            prev = out[-1]
            gap_d, gap_p = d_first - prev.d_last, p_first - prev.p_last
            # A substitution is filled with source text only inside one statement of the source.
            if gap_d == gap_p == 0 or 0 <= gap_d <= bridge and 0 <= gap_p <= bridge and _one_statement(
                    doc, prev.d_last - 1, d_first):
                if gap_d or gap_p:
                    prev.subs.append((prev.p_last, p_first, prev.d_last, d_first))
                prev.p_last, prev.d_last = p_last, d_last
                continue
        out.append(st)
    return out


def _has_digit(tokens: list[str] | tuple[str, ...]) -> bool:
    return bool(tokens) and all(any(ch.isdigit() for ch in t) for t in tokens)


def _boundary(doc: DocumentIndex, a: int) -> bool:
    """Whether a sentence or block of the source ends between document tokens `a` and `a + 1`."""
    text = doc.text
    start, end = doc.span(a, a + 1)
    between = text[end : doc.span(a + 1, a + 2)[0]]
    if not breaks_statement(between):
        return False
    # "3." that opens a numbered list item is a marker, not the end of a sentence.
    line = text[text.rfind("\n", 0, start) + 1 : start]
    return not (text[start:end].isdigit() and not line.strip() and between.strip() in (".", ")"))


def _trim(st: Stretch, seg_len: int, doc: DocumentIndex, n: int) -> None:
    """Drop the few words a located piece takes across a sentence end where the passage goes on otherwise.

    An n-gram that spans the end of a source sentence can match by chance ("... first year. The"
    against "... first year. The Ashford pilot ..."): fewer than n words on the far side, with the
    passage continuing in words the source does not have there, belong to no statement of the source.
    """
    if st.p_last < seg_len:
        for k in range(1, min(n, st.d_last - st.d_first)):
            a = st.d_last - k - 1
            if _boundary(doc, a):
                if all(x[3] <= a + 1 for x in st.subs):
                    st.p_last, st.d_last = st.p_last - k, st.d_last - k
                break
    if st.p_first > 0:
        for k in range(1, min(n, st.d_last - st.d_first)):
            a = st.d_first + k - 1
            if _boundary(doc, a):
                if all(x[2] >= a + 1 for x in st.subs):
                    st.p_first, st.d_first = st.p_first + k, st.d_first + k
                break


@lru_cache(maxsize=8)
def _options(bridge: int) -> tuple[tuple[int, int], ...]:
    """(passage tokens, document tokens) of a substitution, smallest first; (0, 0) is exact."""
    return tuple(sorted(((a, b) for a in range(bridge + 1) for b in range(bridge + 1)),
                        key=lambda ab: (ab[0] + ab[1], abs(ab[0] - ab[1]))))


def _extend_left(st: Stretch, ptoks: tuple[str, ...], doc: DocumentIndex, bridge: int) -> None:
    left = st.p_first
    base = max(0, st.d_first - left - bridge)
    window = doc.tokens_in(base, st.d_first)  # the document tokens the extension may cover
    for gp, gd in _options(bridge):
        rest = left - gp  # passage tokens before the substitution, which must match exactly
        lo = st.d_first - gd - rest
        if rest < 0 or lo < base:
            continue
        if rest == 0 and (gp, gd) != (0, 0):
            # A substitution at the very start has nothing outside it to confirm where it is.
            if not (gp == gd and _has_digit(ptoks[:gp]) and _has_digit(window[len(window) - gd :])):
                continue
        elif ptoks[0] != window[lo - base] or list(ptoks[:rest]) != window[lo - base : lo - base + rest]:
            continue
        # A substitution is filled with source text only inside one statement of the source, and
        # the words it brings in with it belong to that statement too.
        if (gp or gd) and not _one_statement(doc, lo, st.d_first):
            continue
        if gp or gd:
            st.subs.insert(0, (rest, left, st.d_first - gd, st.d_first))
        st.p_first, st.d_first = 0, lo
        return


def _extend_right(st: Stretch, ptoks: tuple[str, ...], doc: DocumentIndex, bridge: int) -> None:
    right = len(ptoks) - st.p_last
    window = doc.tokens_in(st.d_last, st.d_last + right + bridge)
    for gp, gd in _options(bridge):
        rest = right - gp
        if rest < 0 or gd + rest > len(window):
            continue
        hi = st.d_last + gd + rest
        if rest == 0 and (gp, gd) != (0, 0):
            if not (gp == gd and _has_digit(ptoks[st.p_last :]) and _has_digit(window[:gd])):
                continue
        elif ptoks[-1] != window[gd + rest - 1] or list(ptoks[len(ptoks) - rest :]) != window[gd : gd + rest]:
            continue
        if (gp or gd) and not _one_statement(doc, st.d_last - 1, hi - 1):
            continue
        if gp or gd:
            st.subs.append((st.p_last, st.p_last + gp, st.d_last, st.d_last + gd))
        st.p_last, st.d_last = len(ptoks), hi
        return


def _grown(st: Stretch, ptoks: tuple[str, ...], doc: DocumentIndex, bridge: int) -> Stretch | None:
    """A copy of `st` extended to the segment's edges where possible; None if it cannot grow."""
    grown = Stretch(st.seg, st.p_first, st.p_last, st.d_first, st.d_last, list(st.subs))
    if grown.p_first > 0:
        _extend_left(grown, ptoks, doc, bridge)
    if grown.p_last < len(ptoks):
        _extend_right(grown, ptoks, doc, bridge)
    if (grown.p_first, grown.p_last) == (st.p_first, st.p_last):
        return None
    return grown


def _words_around(text: str, start: int, end: int) -> str:
    """The text of [start, end) grown to whole words (up to `_WIDEN` characters each way), trimmed."""
    if start == end:
        return ""
    lo, hi = start, end
    while lo > 0 and start - lo < _WIDEN and not text[lo - 1].isspace():
        lo -= 1
    if lo > 0 and not text[lo - 1].isspace():
        lo = start
    while hi < len(text) and hi - end < _WIDEN and not text[hi].isspace():
        hi += 1
    if hi < len(text) and not text[hi].isspace():
        hi = end
    return text[lo:hi].strip(_TRIM) or text[start:end]


def edge_punctuation(content: str, units: PassageUnits) -> list[tuple[str, str]]:
    """Per segment: the punctuation the passage has before its first and after its last token.

    A span ends at a word; if the passage also copied the sentence's closing period or opening
    quote and the source has exactly those characters there, the span takes them in.
    """
    cuts = [(m.start(), m.end()) for m in ELLIPSIS.finditer(content)]
    out: list[tuple[str, str]] = []
    toks = units.tokens
    for seg in units.segments:
        first, last = seg.first, seg.first + len(seg.tokens) - 1
        s, e = toks.starts[first], toks.ends[last]
        lo = max([c_end for _, c_end in cuts if c_end <= s], default=0)
        hi = min([c_start for c_start, _ in cuts if c_start >= e], default=len(content))
        out.append((content[lo:s].strip(), content[e:hi].strip()))
    return out


def extend_span(text: str, span: tuple[int, int], lead: str, trail: str) -> tuple[int, int]:
    """`span` grown by the passage's edge punctuation where the source has exactly it."""
    start, end = span
    if lead and text[max(0, start - len(lead)) : start] == lead:
        start -= len(lead)
    if trail and text[end : end + len(trail)] == trail:
        end += len(trail)
    return start, end


def _best_statement(stretches: list[Stretch], doc: DocumentIndex) -> list[Stretch]:
    """The group of stretches that reads as one statement and covers the most passage tokens.

    Stretches are taken in passage order without overlapping in the passage; ties go to fewer
    substitutions, then to the earlier group.
    """
    cands = sorted(stretches, key=lambda s: (s.seg, s.p_first, s.p_last))
    raw = [doc.span(s.d_first, s.d_last) for s in cands]
    best: list[tuple[tuple[int, int], int]] = []  # per candidate: (score of the best chain ending here, previous)
    for i, s in enumerate(cands):
        own = (s.p_last - s.p_first, -len(s.subs))
        score, prev = own, -1
        for j in range(i):
            a = cands[j]
            total = (best[j][0][0] + own[0], best[j][0][1] + own[1])
            if (total > score and (a.seg < s.seg or a.p_last <= s.p_first)
                    and reads_as_one_statement(doc.text, raw[j][1], raw[i][0], s.d_first - a.d_last)):
                score, prev = total, j
        best.append((score, prev))
    end = max(range(len(cands)), key=lambda i: (best[i][0], -i))
    chain: list[Stretch] = []
    while end >= 0:
        chain.append(cands[end])
        end = best[end][1]
    return chain[::-1]


def build_quote(
    content: str, units: PassageUnits, doc: DocumentIndex, counts: dict[str, int], bridge: int
) -> Quote:
    """The passage's quote in `doc`: spans in source order, substitutions in passage order."""
    avail = dict(counts)
    pieces: list[Piece] = []
    seg_of: list[int] = []
    for si, seg in enumerate(units.segments):
        for run in covered_runs(units, seg, avail):
            for piece in pieces_of_run(doc, seg, run, units.n):
                if piece.candidates:
                    pieces.append(piece)
                    seg_of.append(si)
    if not pieces:
        return Quote([], [], False)
    def unlike(k: int, pc: int, c: int) -> int:
        if seg_of[k] != seg_of[k - 1]:
            return 0
        prev, cur = pieces[k - 1], pieces[k]
        said = " ".join(units.segments[seg_of[k]].tokens[prev.p_last : cur.p_first])
        there = " ".join(doc.tokens_in(pc + (prev.p_last - prev.p_first), c))
        return round(100 * (1 - SequenceMatcher(None, said, there).ratio()))

    starts = choose_occurrences(pieces, unlike)
    stretches: list[Stretch] = []
    for si, seg in enumerate(units.segments):
        mine = [(p, s) for p, s, k in zip(pieces, starts, seg_of, strict=False) if k == si]
        if not mine:
            continue
        merged = _merge(si, len(seg.tokens), [p for p, _ in mine], [s for _, s in mine], bridge, doc, units.n)
        for st in merged:
            if st.subs:  # a gap whose words the passage repeats as the source has them is no substitution
                st.subs = [x for x in st.subs if list(seg.tokens[x[0] : x[1]]) != doc.tokens_in(x[2], x[3])]
        stretches.extend(merged)
        if bridge:
            # Each stretch may also reach the segment's edges over a substitution; which version
            # ends up in the quote is decided with the others, by what reads as one statement.
            for st in merged:
                if st.p_first > 0 or st.p_last < len(seg.tokens):
                    grown = _grown(st, seg.tokens, doc, bridge)
                    if grown is not None:
                        stretches.append(grown)
    chain = _best_statement(stretches, doc)

    edges = edge_punctuation(content, units)
    ptoks = units.tokens
    spans: list[tuple[int, int]] = []
    subs: list[Substitution] = []
    for st in chain:
        seg = units.segments[st.seg]
        lead, trail = edges[st.seg]
        span = extend_span(doc.text, doc.span(st.d_first, st.d_last),
                           lead if st.p_first == 0 else "", trail if st.p_last == len(seg.tokens) else "")
        # A continuation that touches the previous span (through punctuation taken in) is one span.
        if spans and spans[-1][0] <= span[0] <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], span[1]))
        else:
            spans.append(span)
        for p_a, p_b, d_a, d_b in st.subs:
            said = (_words_around(content, ptoks.starts[seg.first + p_a], ptoks.ends[seg.first + p_b - 1])
                    if p_b > p_a else "")
            source = _words_around(doc.text, *doc.span(d_a, d_b)) if d_b > d_a else ""
            subs.append(Substitution(passage=said, source=source))
    covered = sum(st.p_last - st.p_first for st in chain)
    return Quote(spans, subs, covered == sum(len(seg.tokens) for seg in units.segments))
