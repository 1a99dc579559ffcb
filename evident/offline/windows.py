"""Candidate windows: short runs of consecutive sentence units of a retrieved page that share the
question's weighted terms, grown to the sentences that read on from them, each scored (by
`evident.offline.scoring`, over pages read by `evident.offline.units`) and, for pages retrieved by
meaning, fused with its cosine to the question. Pure Python, no framework imports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evident.alignment.models import SourceDocument
from evident.embeddings.meaning import Window, fuse, semantic_windows
from evident.offline.answerability import Evidence
from evident.offline.scoring import Scorer, heading_terms, under_heading, window_score
from evident.offline.terms import CONTINUATIONS, QUANTITY
from evident.offline.units import Unit, analyse_pages
from evident.settings import DEFAULT_OFFLINE, OfflineSettings

__all__ = [
    "CandidateWindow", "candidate_windows", "is_term", "names_code", "opening_heading", "unit_cosine", "window_at",
]

# A paragraph of at most this many sentences is one thought, quoted whole from any of them.
SHORT_PARAGRAPH = 2
_SENTENCE_END = (".", "!", "?", ":", ";", "。", "！", "？")


@dataclass
class CandidateWindow:
    """Units `first..last` of retrieved page `doc`, with their score and the share of the question's
    weighted terms they cover (`coverage`; `matched` counts the terms); quoted from `lead` to `end`."""

    doc: int
    first: int
    last: int
    score: float
    coverage: float
    matched: int
    # The last unit quoted: `last`, or past it the sentences that read on from it (`_grow`).
    end: int
    # The first unit quoted: `first`, or the page's opening heading right above it (`opening_heading`).
    lead: int
    # The best cosine of its units to the query; None when meaning read none of them.
    cosine: float | None = None

    @property
    def evidence(self) -> Evidence:
        return Evidence(self.coverage, self.cosine)


def _grow(
    units: Sequence[Unit], anchor: int, used: set[int], relevant: set[int], text: str, cap: int,
    whole: bool = False, entry_cap: int = 0,
) -> tuple[int, int, int]:
    """Extend the anchor unit to a window of at most `cap` consecutive units that continue it
    (`whole`: every prose unit of its paragraph does): its first and last scored unit, and the last
    unit it quotes. A definition entry of at most `entry_cap` units is the window whole."""
    a = units[anchor]
    first = last = anchor
    count = 1
    # A definition entry (the text under a term heading) is one unit: quoted whole when it is no longer
    # than an answer may be, so that its default is never cut from the setting it belongs to.
    entry = _entry(units, anchor, text, entry_cap)
    if entry is not None and not any(k in used for k in range(entry[0], entry[1] + 1)):
        return entry[0], entry[1], entry[1]
    # An item reads as an answer only with the label that introduces it.
    if a.kind == "item" and anchor > 0 and (anchor - 1) not in used:
        prev = units[anchor - 1]
        if prev.label and prev.kind != "heading":
            first = anchor - 1
            count += 1
    # A short paragraph of statements is one thought: a sentence of it is quoted with the rest of it. A
    # question in it is a prompt ("Need more help? Contact ..."), not part of what it says.
    if a.kind == "prose" and not a.label:
        lo, hi = _paragraph(units, anchor)
        if hi - lo + 1 <= SHORT_PARAGRAPH and not any(k in used for k in range(lo, hi + 1)) \
                and not any(text[u.start : u.end].rstrip().endswith("?") for u in units[lo : hi + 1]):
            return lo, hi, hi
    while count < cap:
        k = _follows(units, first, last, used, relevant, whole)
        if k is None:
            break
        last = k
        count += 1
    # Past its length, the window still reads on into a sentence that opens by taking it up ("However,
    # the fee is not refunded.", "Here is how."): cut before it, the quote stops mid-thought.
    # Only the window's own units score.
    end = last
    k = _follows(units, first, end, used, relevant, whole)
    if k is not None and units[k].kind == "prose" and units[k].first_word in CONTINUATIONS:
        end = k
    return first, last, end


# What sets a name in code apart from a word of prose: "gc.auto", "--cached", "checkpoint_timeout",
# "--timeout=<n>", "hooksPath", "incremental-repack"; "Payment" or "Downloads" titles a section.
_CODE = re.compile(r"[._=<>$/]|(?<!\w)-|[a-z][A-Z]|\w-\w")


def names_code(heading: str) -> bool:
    """The heading names a thing in code (`names_a_thing`, and `_CODE` marks it), as a reference entry's
    term does."""
    return names_a_thing(heading) and bool(_CODE.search(heading.lstrip("#")))


def _entry(units: Sequence[Unit], anchor: int, text: str, cap: int) -> tuple[int, int] | None:
    """The first and last unit of the definition entry `units[anchor]` is in: the units under a heading
    that names a thing in code (`names_code`), up to the next heading; None outside one, or when it holds
    more than `cap` units (read no further than that: every unit of a long section is an anchor)."""
    h = units[anchor].section
    if h < 0 or units[h].kind != "heading" or not names_code(text[units[h].start : units[h].end]):
        return None
    last = h + 1
    while last + 1 < len(units) and units[last + 1].section == h:
        last += 1
        if last - h > cap:
            return None
    return (h + 1, last) if last - h <= cap else None


def _paragraph(units: Sequence[Unit], anchor: int) -> tuple[int, int]:
    """The first and last prose unit of the paragraph `units[anchor]` is in."""
    lo = anchor
    while lo > 0 and not units[lo].new_paragraph and units[lo - 1].kind == "prose" and not units[lo - 1].heading \
            and not units[lo - 1].noise:
        lo -= 1
    hi = anchor
    while hi + 1 < len(units) and not units[hi + 1].new_paragraph and units[hi + 1].kind == "prose" \
            and not units[hi + 1].heading and not units[hi + 1].noise:
        hi += 1
    return lo, hi


def opening_heading(units: Sequence[Unit], first: int, used: set[int], text: str) -> int:
    """The first unit to quote for a window whose text starts at `first`: the heading right above it
    when that is a definition's term (`is_term`) or the heading that opens the page's text (only the
    page's title line, or page chrome, above it), else `first`.

    A term says what its description is about: "The default is 60 days." is gc.rerereResolved's
    default, not gc.rerereUnresolved's, and only "gc.rerereResolved" right above it says so; the
    composer shows the term and its first sentence as one statement. "What is a grace period?", "How
    do I renew a permit?" under the page's title line say what the whole page answers: quoted with the
    text under it, the composer shows it right before its first sentence (it pairs a title line with
    that sentence); often that heading is what a reader was asking. Other section headings are left
    out: their text answers on its own, and shown first they push the sentence that holds the answer
    to second place. Only the nearest heading, never the page's first line (its title, which the
    citation names)."""
    u = units[first]
    h = first - 1
    if h < 1 or u.kind != "prose" or u.label or u.section != h or h in used or units[h].noise:
        return first
    if is_term(units[h], text):
        return h
    # The page's first line is its title line however it was read: run together with the breadcrumbs
    # after it ("...for Contract StaffTessellate Benefits Program...")
    # it is too long for a heading, yet the heading under it still opens the page's text.
    # A first line that ends like a sentence is text, not a title.
    top = units[0]
    titled = top.noise or (top.kind in ("prose", "heading")
                           and not text[top.start : top.end].rstrip().rstrip("\"'”’)]").endswith(_SENTENCE_END))
    return h if titled and all(x.heading or x.noise for x in units[1:h]) else first


def is_term(unit: Unit, text: str) -> bool:
    """`unit` is a Markdown heading that names a thing rather than titles a section: each of its
    comma-separated parts is one word ("gc.pruneExpire", "-u, --include-untracked", "--timeout=<n>").
    HTML indexing writes a definition's term (`dt`) so; a title ("Submitting expenses", "9. Payment")
    has spaces in it."""
    return unit.kind == "heading" and names_a_thing(text[unit.start : unit.end])


_PARENTHESIS = re.compile(r"\s*\([^()]*\)")


def names_a_thing(heading: str) -> bool:
    """Each comma-separated part of the heading's text (its "#" markers and what it says in parentheses
    aside: "checkpoint_timeout (integer)") is one word."""
    return all(p.strip() and len(p.split()) == 1 for p in _PARENTHESIS.sub("", heading.lstrip("#")).split(","))


def table_header(units: Sequence[Unit], first: int, used: set[int], rows: int) -> int:
    """The first unit to quote for a window whose text starts at table row `first`: its table's header
    row, when at most `rows` rows lie between them (they are quoted too), else `first`.

    A row read without its header is a line of values ("25,000 to 100,000 USD | Purchase request with
    three competing quotes | Your director, Finance and the Chief Financial Officer"); under its header
    ("Total value | How to buy | Approvals") it says what each value is."""
    u = units[first]
    if u.kind != "row" or u.label:
        return first
    h = first - 1
    # Up through the rows of its table (its |---| line is a row too), and no further.
    while h >= 0 and units[h].kind == "row" and not units[h].label:
        h -= 1
    if h < 0 or units[h].kind != "row" or not units[h].label or any(k in used for k in range(h, first)):
        return first
    between = sum(1 for x in units[h + 1 : first] if not x.noise)
    return h if between <= rows else first


def _follows(
    units: Sequence[Unit], first: int, last: int, used: set[int], relevant: set[int], whole: bool
) -> int | None:
    """The unit after the window `units[first..last]` that continues it, if any."""
    j = last + 1
    # Separators and fences (noise) ride along only when a real unit after them joins the window.
    k = j
    while k < len(units) and units[k].noise and k - j < 2 and k not in used:
        k += 1
    if k >= len(units) or k in used or units[k].noise or any(x in used for x in range(j, k)):
        return None
    nxt = units[k]
    tail = units[last]
    # A new section or paragraph is a new thought: it gets its own window unless a label leads into it.
    if nxt.kind == "heading" or (not tail.label and any(units[x].new_paragraph for x in range(j, k + 1))):
        return None
    continues = (
        k in relevant
        or (whole and nxt.kind == "prose")
        or tail.label
        or (nxt.kind == tail.kind and nxt.kind in ("item", "row") and units[first].label)
        or (nxt.kind == "prose" and nxt.first_word in CONTINUATIONS)
    )
    return k if continues else None


def window_at(
    scorer: Scorer, units: Sequence[Unit], d: int, first: int, last: int, anchor: int,
    end: int | None = None, lead: int | None = None,
) -> CandidateWindow | None:
    """The window `units[first..last]` of document `d`, grown from `anchor` and quoted from `lead` to
    `end` (by default `first` and `last`), with its score and coverage; None for a heading alone (its
    text went to other windows: it says nothing by itself)."""
    span = units[first : last + 1]
    if all(u.label and u.kind != "row" and u.section < 0 or u.noise for u in span):
        return None
    terms = frozenset().union(*(u.terms for u in span if not u.noise))
    unit_pairs = frozenset().union(*(u.pairs for u in span if not u.noise))
    # Only the text counts toward the length penalty: a FAQ's question or a list's label in front
    # of its answer ("How much will I pay?" + "Nothing. The company covers...") is what makes it one.
    n_words = sum(len(u.key) for u in span if not u.label)
    text = [u for u in span if not u.noise and not u.label]
    text_terms = frozenset().union(*(u.terms for u in text))
    own = scorer.raw(text_terms, frozenset().union(*(u.pairs for u in text)))
    full = scorer.raw(terms, unit_pairs) + under_heading(scorer, units, units[first], d)
    above = heading_terms(scorer, units, units[first], d)
    heads = terms.difference(text_terms) | above
    score = window_score(scorer, d, full, own, text_terms, heads, n_words)
    # The heading a window sits under is part of what it says ("I need more time" above "If
    # you are travelling..."); above the first heading, that is the page title. A name the
    # question asks about ("Tessellate") is shared when the page names it, as coverage counts it:
    # "Passwords must be at least 14 characters long." on that company's page shares two words with
    # "What is the minimum length for a password at Tessellate?", not one.
    named = scorer.names_in(d)
    return CandidateWindow(
        d, first, last, score, scorer.coverage(terms | above, d),
        sum(1 for t in scorer.weights if t != QUANTITY and (t in terms or t in named)), last if end is None else end,
        first if lead is None else lead,
    )


def candidate_windows(
    query: str, documents: Sequence[SourceDocument], semantic_weight: float = 0.0,
    settings: OfflineSettings = DEFAULT_OFFLINE,
) -> tuple[Scorer, list[tuple[Unit, ...]], list[CandidateWindow]]:
    """Every candidate window of `documents` for `query`, best score first (ties: document, position).

    With `semantic_weight` > 0 and documents that carry the cosines of their windows to the query
    (`SEMANTIC_WINDOWS`, set by a retrieval by meaning), units and windows are ranked by
    `evident.embeddings.meaning.fuse` of their lexical score and their cosine: a sentence that says
    what was asked in other words ranks above where its words alone put it, though one that shares no
    word with the query scores at most `semantic_weight` of the best and cannot lead (docs/embeddings.md).
    Coverage stays lexical; the answerability gate blends it with the window's cosine
    (`evident.offline.answerability`)."""
    analysed = analyse_pages([d.content for d in documents])
    units = [a.units for a in analysed]
    scorer = Scorer(query, analysed, documents, settings)
    meaning = [semantic_windows(d) for d in documents] if semantic_weight > 0 else []
    if not any(meaning):
        meaning = []
    if scorer.total <= 0 and not meaning:
        return scorer, units, []

    cosine: dict[tuple[int, int], float] = {}
    scores: dict[tuple[int, int], float] = {}
    for d, doc_units in enumerate(units):
        for u in doc_units:
            if u.noise:
                continue
            full = own = 0.0
            if scorer.total > 0:
                own = scorer.raw(u.terms, u.pairs)
                full = own + under_heading(scorer, doc_units, u, d)
            read = unit_cosine(meaning[d], u.start, u.end) if meaning else None
            if read is not None:
                cosine[(d, u.idx)] = read
            if full > 0:
                heads = heading_terms(scorer, doc_units, u, d)
                scores[(d, u.idx)] = window_score(scorer, d, full, own, u.terms, heads, len(u.key))
            elif cosine.get((d, u.idx), 0.0) > 0:
                scores[(d, u.idx)] = 0.0
    if meaning:
        keys = list(scores)
        # A page that carries no windows at all (not embedded yet: an index still being embedded) has no
        # meaning to read: its units rank by their words (`fuse`), not as if meaning had found them unrelated.
        fused = fuse([scores[key] for key in keys],
                     [cosine.get(key, 0.0) if meaning[key[0]] else None for key in keys], semantic_weight)
        scores = dict(zip(keys, fused, strict=True))

    order = sorted(scores, key=lambda k: (-scores[k], k[0], k[1]))

    used: list[set[int]] = [set() for _ in documents]
    relevant: list[set[int]] = [set() for _ in documents]
    for d, i in scores:
        relevant[d].add(i)
    windows: list[CandidateWindow] = []
    opened: set[int] = set()  # documents that have a window already
    for d, i in order:
        if i in used[d]:
            continue
        # The best window is the answer's lead: it takes the rest of its paragraph (up to `window_units`).
        # So does each page's own best window, where that page answers if it is the one cited, and a
        # window opening a section (the first unit under a heading or under the page title), which
        # starts a thought the sentences after it develop.
        whole = d not in opened or units[d][i].depth == 1
        first, last, end = _grow(units[d], i, used[d], relevant[d], documents[d].content, settings.window_units,
                                 whole=whole, entry_cap=settings.max_long_sentences)
        lead = table_header(units[d], opening_heading(units[d], first, used[d], documents[d].content), used[d],
                            settings.window_units)
        used[d].update(range(lead, end + 1))
        w = window_at(scorer, units[d], d, first, last, i, end, lead)
        if w is not None:
            windows.append(w)
            opened.add(d)
    if meaning and windows:
        # A window none of whose units meaning read (past a remote page's embedded opening) has no
        # cosine: the gate reads its words, as it reads a page retrieved by words alone.
        best = [max((cosine[w.doc, k] for k in range(w.first, w.last + 1) if (w.doc, k) in cosine), default=None)
                for w in windows]  # fmt: skip
        fused = fuse([w.score for w in windows], [cos or 0.0 if meaning[w.doc] else None
                                                  for w, cos in zip(windows, best, strict=True)], semantic_weight)
        for w, score, cos in zip(windows, fused, best, strict=True):
            w.score = score
            w.cosine = cos
    windows.sort(key=lambda w: (-w.score, w.doc, w.first))
    return scorer, units, windows


def unit_cosine(windows: Sequence[Window], start: int, end: int) -> float | None:
    """The best cosine among the embedded windows that overlap the text `[start, end)`; None when no
    embedded window does (meaning did not read it)."""
    return max((c for s, e, c in windows if s < end and start < e), default=None)
