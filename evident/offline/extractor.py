"""Deterministic lexical passage extractor: the offline stand-in for the LLM extraction call.

It picks short windows of consecutive sentence units that share weighted query terms, and quotes each
window verbatim (`document.content[start:end]`), so that alignment keeps every passage as-is. Pure
Python, no framework imports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from evident.alignment.models import Passage, SourceDocument
from evident.offline.sentences import CONTINUATIONS, Kind, is_noise, split_units
from evident.offline.terms import (
    ENTITY_WEIGHT, content_keys, entity_keys, pairs, query_terms, scenario_keys, unit_terms,
)

__all__ = ["address_score", "extract_passages"]

# A window is the best unit plus what continues it; beyond this it stops being a quote and becomes a page.
MAX_WINDOW = 3
# A label ("Refunds are not available for:") is only useful with the list it introduces.
MAX_LABELLED_WINDOW = 5
# A table row further than this below its header is quoted without it (the window would be the table).
MAX_HEADER_GAP = 3
# A query term is "good" (specific enough to anchor an answer) when its IDF reaches this share of the
# IDF of a term seen in a single sentence.
GOOD_IDF_RATIO = 0.45
# Query words that also sit next to each other in the sentence ("refund window") say more.
BIGRAM_BONUS = 0.25
# Retrieval order is evidence too: a window of the k-th document (from 0) scores 1 / (1 + RANK_DECAY * k).
RANK_DECAY = 0.1
# Coverage left to a window whose document never mentions a name the question asks about.
ENTITY_MISS = 0.5
# Abstention threshold on `address_score`, chosen on the development set's trade-off curve
# (benchmarks/abstention.py, docs/evaluation.md): false abstention at most 3% of answerable questions.
MIN_COVERAGE = 0.28
# Windows after the first need less coverage (multi-part questions) but must stay near the best one.
SECONDARY_COVERAGE_RATIO = 0.5
SECONDARY_SCORE_RATIO = 0.5
# Units repeated in the retrieved text are footers, banners and table headers, not evidence; a
# sentence found twice may be one policy quoted on two pages, so that costs little.
REPEATED_IN_2 = 0.8
REPEATED_IN_3 = 0.2
# Past this many words a unit (a run-on table row, an unpunctuated paragraph) matches by sheer size.
LONG_UNIT_WORDS = 40
_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class _Unit:
    idx: int
    start: int
    end: int
    kind: Kind
    noise: bool
    label: bool
    terms: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    key: tuple[str, ...]
    first_word: str
    new_paragraph: bool
    # The section heading this unit sits under (its index, -1 if none) and how many units below it.
    section: int = -1
    depth: int = 0


@dataclass
class _Window:
    doc: int
    first: int
    last: int
    score: float
    coverage: float
    good: bool
    matched: int


@dataclass(frozen=True)
class _Doc:
    units: tuple[_Unit, ...]
    terms: frozenset[str]


# Past this many words a line is a paragraph, not a heading.
HEADING_WORDS = 16


def _is_section_heading(text: str, start: int, end: int, kind: Kind) -> bool:
    """A Markdown heading, or a short line standing alone that does not end like a sentence (the
    headings of HTML-extracted pages; a FAQ's question counts, its answer follows)."""
    if kind == "heading":
        return True
    if kind != "prose" or text[start:end].rstrip().endswith((".", "!", ":", ";", ",")):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    alone = not text[line_start:start].strip() and not text[end : len(text) if line_end < 0 else line_end].strip()
    return alone and len(text[start:end].split()) <= HEADING_WORDS


@lru_cache(maxsize=256)
def _analyse(text: str) -> _Doc:
    """Units of one document with their matching keys; cached because the same pages come back
    for query after query (a str caches its own hash, so the key costs nothing after the first)."""
    out: list[_Unit] = []
    prev_end = 0
    spans = split_units(text)
    section, depth = -1, 0
    for idx, (s, e, kind) in enumerate(spans):
        heading = _is_section_heading(text, s, e, kind)
        if heading:
            section, depth = idx, 0
        else:
            depth += 1
        gap = text[prev_end:s]
        prev_end = e
        noise = is_noise(text[s:e], kind)
        # A table's first row is its header: it introduces the rows below like a label does.
        header = (
            kind == "row"
            and not noise
            and (idx == 0 or spans[idx - 1][2] != "row")
            and idx + 1 < len(spans)
            and spans[idx + 1][2] == "row"
        )
        body = text[s:e]
        seq = unit_terms(body)
        keys = content_keys(body)
        out.append(
            _Unit(
                idx=idx,
                start=s,
                end=e,
                kind=kind,
                noise=noise,
                # A heading is quoted with the text it introduces, never alone.
                label=heading or body.rstrip("*_ ").endswith(":") or header,
                terms=frozenset(seq),
                pairs=frozenset(pairs(seq)),
                key=keys,
                first_word=keys[0] if keys else "",
                new_paragraph=idx > 0 and len(_BREAK.findall(gap)) >= 2,
                section=section if section != idx else -1,
                depth=depth,
            )
        )
    return _Doc(tuple(out), frozenset().union(*(u.terms for u in out)))


# An archived or deprecated page still answers questions about the past, but its rule must not
# outrank the current one that says the same thing in nearly the same words.
SUPERSEDED = 0.5
_STALE = ("archived", "deprecated", "superseded", "obsolete", "outdated")


def is_superseded(doc: SourceDocument) -> bool:
    """Marked stale by its metadata (`status: archived`, …) or by a title such as "ARCHIVED - …"."""
    status = str(doc.metadata.get("status", "")).strip().casefold()
    return status in _STALE or doc.title.lstrip("[( ").casefold().startswith(_STALE)


class _Scorer:
    """Query-term weights from IDF over the retrieved sentences, and the scores built on them."""

    def __init__(self, query: str, analysed: list[_Doc], documents: Sequence[SourceDocument]) -> None:
        live = [u for doc in analysed for u in doc.units if not u.noise]
        n = len(live)
        df: dict[str, int] = {}
        for u in live:
            for t in u.terms:
                df[t] = df.get(t, 0) + 1
        terms = query_terms(query)
        self.names = entity_keys(query)
        # Unseen terms get the IDF of a term seen once: a paraphrase is likely, not proof of absence.
        self.top_idf = math.log(1 + (n - 1 + 0.5) / 1.5) if n else 1.0
        self.weights: dict[str, float] = {}
        self.idf: dict[str, float] = {}
        for t, prior in terms:
            d = max(1, df.get(t, 0))
            self.idf[t] = math.log(1 + (n - d + 0.5) / (d + 0.5)) if n else 1.0
            if t in self.names:
                prior *= ENTITY_WEIGHT
            self.weights[t] = self.idf[t] * prior
        self.total = sum(self.weights.values())
        self.scenario = scenario_keys(query)
        self.pairs = frozenset(pairs([t for t, _ in terms]))
        # Names the retrieved set knows, per document (title and URL included): a window from a
        # document that never names what the question names is about something else.
        self.doc_terms = [doc.terms.union(unit_terms(f"{d.title} {d.url}")) for doc, d in zip(analysed, documents)]
        self.known_names = frozenset(t for t in self.names if any(t in dt for dt in self.doc_terms))
        # Text that recurs (a footer on every page, the same table header above every table) is
        # page structure, however well it matches.
        copies: dict[tuple[str, ...], int] = {}
        for u in live:
            if u.key:
                copies[u.key] = copies.get(u.key, 0) + 1
        self.repeats = {k: c for k, c in copies.items() if c > 1}
        self.superseded = [is_superseded(d) for d in documents]
        # Each page title's terms and word pairs: the heading of the text above the first heading.
        titles = [unit_terms(d.title) for d in documents]
        self.titles = [(frozenset(t), frozenset(pairs(t))) for t in titles]

    def coverage(self, terms: frozenset[str], doc: int) -> float:
        """Share of the query weight a window covers; names count when its document names them.
        Scenario terms count only where they match: the scenario chooses, it does not veto."""
        present = terms | (self.names & self.doc_terms[doc])
        missing = sum(w for t, w in self.weights.items() if t in self.scenario and t not in present)
        share = self.matched(present) / (self.total - missing) if self.total > missing else 0.0
        if any(t not in self.doc_terms[doc] for t in self.known_names):
            share *= ENTITY_MISS
        return share

    def matched(self, terms: frozenset[str]) -> float:
        return sum(w for t, w in self.weights.items() if t in terms)

    def raw(self, terms: frozenset[str], unit_pairs: frozenset[tuple[str, str]]) -> float:
        bonus = sum(BIGRAM_BONUS * (self.weights[a] + self.weights[b]) for a, b in self.pairs & unit_pairs)
        return self.matched(terms) + bonus

    def factor(self, doc: int, key: tuple[str, ...], n_words: int) -> float:
        """Multipliers that do not depend on the query terms: rank, repetition, length."""
        f = 1.0 / (1.0 + RANK_DECAY * doc)
        if self.superseded[doc]:
            f *= SUPERSEDED
        copies = self.repeats.get(key, 1)
        if copies >= 3:
            f *= REPEATED_IN_3
        elif copies == 2:
            f *= REPEATED_IN_2
        if n_words > LONG_UNIT_WORDS:
            f /= 1 + (n_words - LONG_UNIT_WORDS) / (2 * LONG_UNIT_WORDS)
        return f

    def good(self, terms: frozenset[str]) -> bool:
        return any(t in terms and self.idf[t] >= GOOD_IDF_RATIO * self.top_idf for t in self.weights)


def _grow(
    units: Sequence[_Unit], anchor: int, used: set[int], relevant: set[int], whole: bool = False
) -> tuple[int, int]:
    """Extend the anchor unit to a window of consecutive units that continue it (`whole`: every
    prose unit of its paragraph does)."""
    a = units[anchor]
    first = last = anchor
    count = 1
    cap = MAX_WINDOW
    # An item reads as an answer only with the label that introduces it, a table row with its header.
    if a.kind == "item" and anchor > 0 and (anchor - 1) not in used:
        prev = units[anchor - 1]
        if prev.label and prev.kind != "heading":
            first = anchor - 1
            count += 1
            cap = MAX_LABELLED_WINDOW
    elif a.kind == "row":
        head = anchor
        while head > 0 and units[head - 1].kind == "row":
            head -= 1
        between = range(head, anchor)
        if 0 < anchor - head <= MAX_HEADER_GAP and not any(k in used for k in between):
            first = head
            count += sum(1 for k in between if not units[k].noise)
            cap = MAX_LABELLED_WINDOW
    if a.label:
        cap = MAX_LABELLED_WINDOW
    j = last + 1
    while count < cap and j < len(units):
        # Separators and fences (noise) ride along only when a real unit after them joins the window.
        k = j
        while k < len(units) and units[k].noise and k - j < 2 and k not in used:
            k += 1
        if k >= len(units) or k in used or units[k].noise or any(x in used for x in range(j, k)):
            break
        nxt = units[k]
        tail = units[last]
        # A new section or paragraph is a new thought: it gets its own window unless a label leads into it.
        if nxt.kind == "heading" or (not tail.label and any(units[x].new_paragraph for x in range(j, k + 1))):
            break
        continues = (
            k in relevant
            or (whole and nxt.kind == "prose")
            or tail.label
            or (nxt.kind == tail.kind and nxt.kind in ("item", "row") and units[first].label)
            or (nxt.kind == "prose" and nxt.first_word in CONTINUATIONS)
        )
        if not continues:
            break
        last = k
        count += 1
        j = k + 1
    return first, last


# A section heading that matches the question ("I need an extension (I am not in New York right
# now)") points at the text under it, which answers in other words: the first unit below it gets
# HEADING_SHARE of the heading's score, each further unit HEADING_DECAY times less.
HEADING_SHARE = 1.0
HEADING_DECAY = 0.5


# Text before the page's first heading sits under its title: the opening paragraph says what the
# page is about, so it gets the title's score like the text under a heading gets the heading's.
TITLE_SHARE = 1.0


def _under_heading(scorer: _Scorer, units: Sequence[_Unit], u: _Unit, doc: int) -> float:
    if HEADING_SHARE <= 0:
        return 0.0
    if u.section < 0:
        # depth 0: a heading itself, which is under no title
        if u.depth < 1:
            return 0.0
        title, title_pairs = scorer.titles[doc]
        return TITLE_SHARE * scorer.raw(title, title_pairs) * HEADING_DECAY ** max(0, u.depth - 1)
    head = units[u.section]
    # Only what the unit does not already say: a heading repeating the unit's words adds nothing.
    return HEADING_SHARE * scorer.raw(head.terms, head.pairs) * HEADING_DECAY ** max(0, u.depth - 1)


def _windows(query: str, documents: Sequence[SourceDocument]) -> tuple[_Scorer, list[tuple[_Unit, ...]], list[_Window]]:
    """Every candidate window of `documents` for `query`, best score first (ties: document, position)."""
    analysed = [_analyse(d.content) for d in documents]
    units = [a.units for a in analysed]
    scorer = _Scorer(query, analysed, documents)
    if scorer.total <= 0:
        return scorer, units, []

    scores: dict[tuple[int, int], float] = {}
    for d, doc_units in enumerate(units):
        for u in doc_units:
            if u.noise:
                continue
            raw = scorer.raw(u.terms, u.pairs) + _under_heading(scorer, doc_units, u, d)
            if raw > 0:
                scores[(d, u.idx)] = raw * scorer.factor(d, u.key, len(u.key))

    order = sorted(scores, key=lambda k: (-scores[k], k[0], k[1]))

    used: list[set[int]] = [set() for _ in documents]
    relevant: list[set[int]] = [set() for _ in documents]
    for d, i in scores:
        relevant[d].add(i)
    windows: list[_Window] = []
    for d, i in order:
        if i in used[d]:
            continue
        # The best window is the answer's lead: it takes the rest of its paragraph (up to MAX_WINDOW).
        first, last = _grow(units[d], i, used[d], relevant[d], whole=not windows)
        span = units[d][first : last + 1]
        used[d].update(range(first, last + 1))
        terms = frozenset().union(*(u.terms for u in span if not u.noise))
        unit_pairs = frozenset().union(*(u.pairs for u in span if not u.noise))
        n_words = sum(len(u.key) for u in span)
        if all(u.label and u.kind != "row" and u.section < 0 or u.noise for u in span):
            continue  # a heading whose text went to other windows says nothing by itself
        lead = _under_heading(scorer, units[d], units[d][first], d)
        score = (scorer.raw(terms, unit_pairs) + lead) * scorer.factor(d, units[d][i].key, n_words)
        # The heading a window sits under is part of what it says ("I need an extension" above "If
        # you are out of state..."); above the first heading, that is the page title.
        section = units[d][first].section
        if section >= 0:
            context = terms | units[d][section].terms
        elif units[d][first].depth >= 1:
            context = terms | scorer.titles[d][0]
        else:
            context = terms
        windows.append(
            _Window(
                d, first, last, score, scorer.coverage(context, d), scorer.good(terms),
                sum(1 for t in scorer.weights if t in terms),
            )
        )
    windows.sort(key=lambda w: (-w.score, w.doc, w.first))
    return scorer, units, windows


def address_score(query: str, documents: Sequence[SourceDocument]) -> float:
    """How well the retrieved text addresses `query` (0..1): the largest share of the query's
    weighted terms that one window covers, among windows holding a specific term. The extractor
    abstains below its `min_coverage`; benchmarks/abstention.py draws the trade-off curve of it."""
    if not documents:
        return 0.0
    _, _, windows = _windows(query, documents)
    return max((w.coverage for w in windows), default=0.0)


def extract_passages(
    query: str,
    documents: Sequence[SourceDocument],
    *,
    max_passages: int = 6,
    max_per_document: int = 3,
    min_coverage: float = MIN_COVERAGE,
) -> list[Passage]:
    """Verbatim sentence windows from `documents` (in retrieval rank order) relevant to `query`.

    Each passage is `document.content[start:end]` for a window of at most ~3 consecutive units
    (5 for a label or table header with its list or rows), ids "p1", "p2", ... in score order
    (ties: document order, then position); at most `max_per_document` per document, never
    overlapping. Returns [] when `address_score` is below `min_coverage` (no window covers that
    share of the query's IDF-weighted term weight with at least one specific, high-IDF term): the
    caller then answers "not sufficient information".
    """
    if max_passages <= 0 or not documents:
        return []
    scorer, units, windows = _windows(query, documents)
    if not windows:
        return []
    best = next((w for w in windows if w.coverage >= min_coverage), None)
    if best is None:
        return []

    passages: list[Passage] = []
    per_doc: dict[int, int] = {}
    for w in windows:
        if len(passages) >= max_passages:
            break
        if w is not best and (
            w.coverage < min_coverage * SECONDARY_COVERAGE_RATIO
            or w.score < SECONDARY_SCORE_RATIO * best.score
            # One shared word ("team") is a coincidence; the first window already answers it.
            or w.matched < min(2, len(scorer.weights))
        ):
            continue
        if per_doc.get(w.doc, 0) >= max_per_document:
            continue
        per_doc[w.doc] = per_doc.get(w.doc, 0) + 1
        doc = documents[w.doc]
        start, end = units[w.doc][w.first].start, units[w.doc][w.last].end
        passages.append(Passage(passage_id=f"p{len(passages) + 1}", url=doc.url, content=doc.content[start:end]))
    return passages
