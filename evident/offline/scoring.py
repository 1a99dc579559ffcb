"""Query-term weights over the retrieved text, and the scores of units and windows built on them
(the offline extractor's candidate scoring). Pure Python, no framework imports."""

from __future__ import annotations

import math
from collections.abc import Sequence

from evident.alignment.models import SourceDocument
from evident.offline.terms import (
    ENTITY_WEIGHT,
    entity_keys,
    matched,
    pairs,
    query_terms,
    scenario_keys,
    unit_terms,
)
from evident.offline.units import Doc, Unit
from evident.settings import DEFAULT_OFFLINE, OfflineSettings

__all__ = ["Scorer", "heading_terms", "is_superseded", "under_heading", "window_score"]

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

    def __init__(
        self, query: str, analysed: list[Doc], documents: Sequence[SourceDocument],
        settings: OfflineSettings = DEFAULT_OFFLINE,
    ) -> None:
        self.settings = settings
        live = [u for doc in analysed for u in doc.units if not u.noise]
        n = len(live)
        df: dict[str, int] = {}
        for u in live:
            for t in u.terms:
                df[t] = df.get(t, 0) + 1
        terms = query_terms(query)
        self.names = entity_keys(query)
        self.weights: dict[str, float] = {}
        for t, prior in terms:
            # Unseen terms get the IDF of a term seen once: a paraphrase is likely, not proof of absence.
            d = max(1, df.get(t, 0))
            idf = math.log(1 + (n - d + 0.5) / (d + 0.5)) if n else 1.0
            self.weights[t] = idf * prior * (ENTITY_WEIGHT if t in self.names else 1.0)
        self.total = sum(self.weights.values())
        self.scenario = scenario_keys(query)
        self.pairs = frozenset(pairs([t for t, _ in terms]))
        # Names the retrieved set knows, per document (title and URL included): a window from a
        # document that never names what the question names is about something else.
        self.doc_terms = [
            doc.terms.union(unit_terms(f"{d.title} {d.url}")) for doc, d in zip(analysed, documents, strict=True)
        ]
        self.known_names = frozenset(t for t in self.names if any(t in dt for dt in self.doc_terms))
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
            share *= self.settings.name_miss
        return share

    def names_in(self, doc: int) -> frozenset[str]:
        """The names the question asks about that document `doc` (its title and URL included) holds."""
        return self.names & self.doc_terms[doc]

    def matched(self, terms: frozenset[str]) -> float:
        return matched(self.weights, terms)

    def raw(self, terms: frozenset[str], unit_pairs: frozenset[tuple[str, str]]) -> float:
        bonus = sum(self.settings.pair_bonus * (self.weights[a] + self.weights[b]) for a, b in self.pairs & unit_pairs)
        return self.matched(terms) + bonus

    def factor(self, doc: int, n_words: int) -> float:
        """Multipliers that do not depend on the query terms: the page's rank and state, the length."""
        f = 1.0 / (1.0 + self.settings.rank_decay * doc)
        if self.superseded[doc]:
            f *= SUPERSEDED
        long = self.settings.long_unit_words
        if n_words > long:
            f /= 1 + (n_words - long) / (2 * long)
        return f


def under_heading(scorer: Scorer, units: Sequence[Unit], u: Unit, doc: int) -> float:
    """What the heading above `u` adds to its score: the whole heading's match (words the unit repeats
    included: a heading naming what its text says confirms it), `heading_decay` times less for each
    unit further down the section; a heading itself counts its own match twice, as it names what the
    section is about. Above the page's first heading the page title plays the heading. A heading that
    asks the question ("How do I renew a permit?") points at the text under it, which answers in
    other words."""
    decay = scorer.settings.heading_decay ** max(0, u.depth - 1)
    if u.section < 0:
        title, title_pairs = scorer.titles[doc]
        return scorer.raw(title, title_pairs) * decay if u.depth >= 1 else 0.0
    head = units[u.section]
    return scorer.raw(head.terms, head.pairs) * decay


def window_score(
    scorer: Scorer, doc: int, full: float, own: float, text: frozenset[str], heads: frozenset[str], n_words: int,
) -> float:
    """`full` (the text's `own` match plus what its heading adds) times every `Scorer.factor`; but
    when the heading's terms (`heads`) match the question at least as well as the text's (`text`),
    what the heading adds is not cut for the text's length: the heading asks the question ("How do I
    avoid an insurance lapse?"), and the text under it (a FAQ answer that HTML extraction made one
    run-on list) is long by its nature, it did not match by sheer size."""
    added = full - own if scorer.matched(heads) >= scorer.matched(text) else 0.0
    return (full - added) * scorer.factor(doc, n_words) + added * scorer.factor(doc, 0)


def heading_terms(scorer: Scorer, units: Sequence[Unit], u: Unit, doc: int) -> frozenset[str]:
    """The terms of the heading `u` sits under (the page title above the first heading; none for
    a heading itself)."""
    if u.section >= 0:
        return units[u.section].terms
    return scorer.titles[doc][0] if u.depth >= 1 else frozenset()
