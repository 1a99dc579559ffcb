"""Query-term weights over the retrieved text, and the scores of units and windows built on them
(the offline extractor's candidate scoring). Pure Python, no framework imports."""

from __future__ import annotations

import math
from collections.abc import Sequence

from evident.alignment.models import SourceDocument
from evident.offline.terms import ENTITY_WEIGHT, entity_keys, pairs, query_terms, scenario_keys, unit_terms
from evident.offline.units import Doc, Unit

__all__ = ["Scorer", "heading_terms", "is_superseded", "under_heading", "window_score"]

# A query term is "good" (specific enough to anchor an answer) when its IDF reaches this share of the
# IDF of a term seen in a single sentence.
GOOD_IDF_RATIO = 0.45
# Query words that also sit next to each other in the sentence ("refund window") say more.
BIGRAM_BONUS = 0.25
# Retrieval order is evidence too: a window of the k-th document (from 0) scores 1 / (1 + RANK_DECAY * k).
# 0.3 (was 0.1) since retrieval scores word proximity (docs/evaluation.md, rules 7 and 30): a better
# first page deserves more trust (swept 0.05/0.1/0.2/0.25/0.3/0.4/0.5). 0.28 (rule 43): re-swept with the
# title-first retrieval of rule 42 (0.2/0.22/0.25/0.27/0.28/0.29/0.3/0.33): 0.27-0.29 quote a gold
# page in 3 more tune answers than 0.3 with the examples unchanged; below, the examples lose.
RANK_DECAY = 0.28
# Coverage left to a window whose document never mentions a name the question asks about.
ENTITY_MISS = 0.5
# Units repeated in the retrieved text are footers, banners and table headers, not evidence; a
# sentence found twice may be one policy quoted on two pages, so that costs little.
REPEATED_IN_2 = 0.8
REPEATED_IN_3 = 0.2
# Past this many words a unit (a run-on table row, an unpunctuated paragraph) matches by sheer size.
LONG_UNIT_WORDS = 40


# An archived or deprecated page still answers questions about the past, but its rule must not
# outrank the current one that says the same thing in nearly the same words.
SUPERSEDED = 0.5
_STALE = ("archived", "deprecated", "superseded", "obsolete", "outdated")


def is_superseded(doc: SourceDocument) -> bool:
    """Marked stale by its metadata (`status: archived`, …) or by a title such as "ARCHIVED - …"."""
    status = str(doc.metadata.get("status", "")).strip().casefold()
    return status in _STALE or doc.title.lstrip("[( ").casefold().startswith(_STALE)


class Scorer:
    """Query-term weights from IDF over the retrieved sentences, and the scores built on them."""

    def __init__(self, query: str, analysed: list[Doc], documents: Sequence[SourceDocument]) -> None:
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
        self.doc_terms = [
            doc.terms.union(unit_terms(f"{d.title} {d.url}")) for doc, d in zip(analysed, documents, strict=True)
        ]
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
        present = terms | self.names_in(doc)
        missing = sum(w for t, w in self.weights.items() if t in self.scenario and t not in present)
        share = self.matched(present) / (self.total - missing) if self.total > missing else 0.0
        if any(t not in self.doc_terms[doc] for t in self.known_names):
            share *= ENTITY_MISS
        return share

    def names_in(self, doc: int) -> frozenset[str]:
        """The names the question asks about that document `doc` (its title and URL included) holds."""
        return self.names & self.doc_terms[doc]

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


# A section heading that matches the question ("I need an extension (I am not in New York right
# now)") points at the text under it, which answers in other words: the first unit below it gets
# HEADING_SHARE of the heading's score, each further unit HEADING_DECAY times less.
HEADING_SHARE = 1.0
HEADING_DECAY = 0.5


# Text before the page's first heading sits under its title: the opening paragraph says what the
# page is about, so it gets the title's score like the text under a heading gets the heading's.
TITLE_SHARE = 1.0


def under_heading(scorer: Scorer, units: Sequence[Unit], u: Unit, doc: int) -> float:
    if HEADING_SHARE <= 0:
        return 0.0
    if u.section < 0:
        # depth 0: a heading itself, which is under no title
        if u.depth < 1:
            return 0.0
        title, title_pairs = scorer.titles[doc]
        return TITLE_SHARE * scorer.raw(title, title_pairs) * HEADING_DECAY ** max(0, u.depth - 1)
    head = units[u.section]
    # The whole heading's match, words the unit repeats included: a heading naming what its text says
    # confirms it (lending only the words the text lacks loses, docs/evaluation.md, rules 46-54 round).
    return HEADING_SHARE * scorer.raw(head.terms, head.pairs) * HEADING_DECAY ** max(0, u.depth - 1)


# The share of a score that a heading (the section heading, the page title above the first heading,
# or a label in the window) adds escapes LONG_UNIT_WORDS' penalty when the heading matches the
# question at least as well as the text does (docs/evaluation.md, rule 34).
HEADING_ESCAPES_LENGTH = True


def window_score(
    scorer: Scorer, doc: int, key: tuple[str, ...], full: float, own: float,
    text: frozenset[str], heads: frozenset[str], n_words: int,
) -> float:
    """`full` (the text's `own` match plus what its heading adds) times every `Scorer.factor`; but
    when the heading's terms (`heads`) match the question at least as well as the text's (`text`),
    what the heading adds is not cut for the text's length: the heading asks the question ("How do I
    avoid an insurance lapse?"), and the text under it (a FAQ answer that HTML extraction made one
    run-on list) is long by its nature, it did not match by sheer size."""
    added = full - own if HEADING_ESCAPES_LENGTH and scorer.matched(heads) >= scorer.matched(text) else 0.0
    return (full - added) * scorer.factor(doc, key, n_words) + added * scorer.factor(doc, key, 0)


def heading_terms(scorer: Scorer, units: Sequence[Unit], u: Unit, doc: int) -> frozenset[str]:
    """The terms of the heading `u` sits under (the page title above the first heading; none for
    a heading itself)."""
    if u.section >= 0:
        return units[u.section].terms
    return scorer.titles[doc][0] if u.depth >= 1 else frozenset()
