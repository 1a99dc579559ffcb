"""BM25 with the caller's own statistics: how the embedded index ranks a search that permissions limit.

Tantivy's statistics count every document of the index. Left as they are, a page the caller may not see
would change what the caller sees: a word only it holds would lower that word's IDF or become a spelling
repair, and its length would shift the average field length that BM25 normalises every term frequency by,
so every score and sometimes an order. Here, N, each word's document frequency and the average field length
are taken over the documents the caller may see (`CallerCounts`), and `ExactRanker` ranks by exactly that
BM25: the top k and their scores are those of an index holding only the caller's documents, bit for bit,
whatever else the index holds.

Framework-free apart from Tantivy; the mirror (evident/connectors/index/ranking.py) builds the clauses and
calls `ExactRanker.top` for such a search.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tantivy

# Tantivy's BM25 parameters (its `Bm25Weight`), which the exact rescoring uses with the caller's statistics.
K1 = 1.2
B = 0.75
# The least a searched word's IDF weighs (`idf_ratio`). FTS5's ln(x), which the ranking follows, reaches 0 at
# half the documents (FTS5 floors it at 1e-6), so in a corpus about one thing its own words ("benefits" in 174
# of doc2dial's 273 pages, "disability" in 135) counted for nothing: "What will the benefits planner used
# for?" was a search for "planner" alone, and the page holding every word of it ranked below the top 50.
# Floored, such a word still separates the pages that hold it from those that do not (docs/evaluation.md,
# rule 53; swept 0.02 to 0.5: retrieval gains up to 0.3, but from 0.1 on an example question's unanswerable
# abstention is lost, "employee" in 17 of 35 pages then counting).
IDF_FLOOR = 0.08
# What a document that was not rescored can score is bounded from its float32 candidate score; this relative
# slack covers that score's rounding (a float32 sum of ~100 clauses errs by < 1e-5).
BOUND_SLACK = 1e-4
TIE_MARGIN = 64  # extra hits fetched so that ties at the k-th place are usually resolved in one go
# The candidates an exact ranking chooses among at most (`ExactRanker.top`'s `pool`): the documents with
# the highest upper bounds. Past it, a page whose bound is lower than that many others' is not ranked,
# even where its exact score would have been among the k best; the cost of a search grows with it (about
# 1.5 ms a candidate on 2 cores: a phrase's count reads the document's text). Near-duplicate pages, whose
# bounds all reach the k-th score, are what makes it bind.
CANDIDATE_POOL = 200

# The constants of a TermQuery's explanation (Tantivy's `Bm25Weight::explain`), by their description.
_EXPLAINED = re.compile(r'"value":\s*([-+0-9.eE]+|null),\s*"description":\s*"(freq|dl|avgdl|N),')


class StaleStatistics(Exception):
    """SQLite and Tantivy disagree on the caller's documents (one is being written): the mirror's owner
    treats it as a mirror it cannot trust."""


class UnreadableStatistics(Exception):
    """Tantivy answered, but its explanation of a score does not say what the exact ranking reads (freq, dl,
    avgdl, N): a Tantivy whose explanation format changed. Not damage: the index is sound, only this way of
    rescoring is unavailable (`ranking.TantivyMirror.top` falls back to Tantivy's own scores)."""


def idf_x(documents: int, matching: int) -> float:
    return (documents - matching + 0.5) / (matching + 0.5)


def idf_ratio(x: float) -> float:
    """FTS5's IDF, floored, over Tantivy's, for x = (N - n + 0.5) / (n + 0.5) (see `ranking.TantivyMirror._query`)."""
    return max(math.log(x), IDF_FLOOR) / math.log1p(x)


@dataclass
class Counted:
    """The counts `CallerCounts` took for one token set in one state of the index, for the next search."""

    documents: int | None = None
    holding: dict[str, int] = field(default_factory=dict)


class CallerCounts:
    """Document counts for a query's statistics, over the documents the caller may see.

    With `visible` tokens, each count is a count query of the term AND the visibility filter; `whole`
    keeps Tantivy's own, which its BM25 multiplies in (a boost divides it out). `known`: the counts of
    earlier searches of the same token set in the same state of the index, kept and added to.
    """

    def __init__(self, schema: Any, searcher: Any, visible: Sequence[str] | None, known: Counted | None = None) -> None:
        self._schema = schema
        self._searcher = searcher
        self.filter = None if visible is None else tantivy.Query.term_set_query(schema, "acl", list(visible))
        known = known if known is not None else Counted()
        self._holding = known.holding
        self.whole_documents = int(searcher.num_docs)
        if known.documents is None:
            known.documents = self.whole_documents if self.filter is None else self._count(self.filter)
        self.documents = known.documents

    def whole(self, token: str) -> int:
        return int(self._searcher.doc_freq("text", token))

    def holding(self, token: str) -> int:
        """How many documents the caller may see hold `token`."""
        if token not in self._holding:
            whole = self.whole(token)
            if self.filter is None or whole == 0:
                self._holding[token] = whole
            else:
                term = tantivy.Query.term_query(self._schema, "text", token)
                self._holding[token] = self._count(self.restricted(term))
        return self._holding[token]

    def restricted(self, query: Any) -> Any:
        """`query` limited to the documents the caller may see; the filter adds nothing to the score."""
        if self.filter is None:
            return query
        only = tantivy.Query.const_score_query(self.filter, 0.0)
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)])

    def _count(self, query: Any) -> int:
        return int(self._searcher.search(query, 1, count=True).count)

    def visible_idf(self, tokens: Sequence[str], *, fts: bool) -> float:
        """The IDF the ranking gives `tokens` over the visible documents: with `fts`, FTS5's ln(x) of one
        token, floored at IDF_FLOOR; else Tantivy's sum of ln(1 + x), as it weighs a phrase."""
        xs = [idf_x(self.documents, self.holding(t)) for t in tokens]
        return max(math.log(xs[0]), IDF_FLOOR) if fts else sum(math.log1p(x) for x in xs)

    def tantivy_idf(self, tokens: Sequence[str], documents: int) -> float:
        """Tantivy's own IDF of `tokens` with `documents` as its N (it counts deleted documents not yet
        merged away, which `num_docs` does not)."""
        return sum(math.log1p(idf_x(documents, self.whole(t))) for t in tokens)

    def idf_boost(self, tokens: Sequence[str], *, fts: bool) -> float:
        """The boost that turns Tantivy's IDF of `tokens` (the sum of ln(1 + x) over the whole index, as
        it weighs a term or a phrase) into the same IDF over the visible documents; with `fts`, into
        FTS5's IDF over them, floored (`idf_ratio`, one token)."""
        whole = sum(math.log1p(idf_x(self.whole_documents, self.whole(t))) for t in tokens)
        xs = [idf_x(self.documents, self.holding(t)) for t in tokens]
        seen = idf_ratio(xs[0]) * math.log1p(xs[0]) if fts else sum(math.log1p(x) for x in xs)
        return seen / whole


@dataclass(frozen=True)
class Clause:
    """One Should clause of a search: a term (one token) or a phrase (two consecutive tokens)."""

    tokens: tuple[str, ...]
    weight: float  # the query's weight of it: its word's (x REPAIR_WEIGHT), or PHRASE_BOOST x the lighter word's
    idf: float  # over the visible documents (`CallerCounts.visible_idf`)
    boost: float  # Tantivy's clause is boosted by it: about weight x idf / Tantivy's own IDF
    query: Any  # the clause without its boost


@dataclass(frozen=True)
class TermStats:
    """What Tantivy's explanations of one document's term clauses report: each term's frequency (0 where
    it does not match), the field length (Tantivy's quantised fieldnorm), and the index-wide N and average
    field length its BM25 used."""

    frequencies: Mapping[str, float]
    length: float
    tantivy_documents: int
    tantivy_average: float


def explained_stats(explanation_json: str) -> dict[str, float]:
    """freq, dl, avgdl and N of a TermQuery explanation (read off its JSON: a parse of the whole tree costs
    more than the rest of the rescoring)."""
    return {name: float(value) for value, name in _EXPLAINED.findall(explanation_json) if value != "null"}


def bm25(clauses: Sequence[Clause], frequencies: Sequence[float], length: float, average_length: float) -> float:
    """The score of a document with these per-clause frequencies and field length, given the caller's
    `average_length`; math.fsum, exactly rounded, so equal inputs give an equal score in any order."""
    norm = K1 * (1.0 - B + B * length / average_length)
    return math.fsum(
        clause.weight * clause.idf * (K1 + 1.0) * frequency / (frequency + norm)
        for clause, frequency in zip(clauses, frequencies, strict=True)
        if frequency > 0
    )


def phrase_count(first: Sequence[int], second: Sequence[int], slop: int) -> int:
    """How many times a phrase query of two words with `slop` matches a document whose first word is at
    the sorted positions `first` and second at `second`: Tantivy's count (`intersection_count_with_slop`
    of its phrase scorer, the first word's positions shifted by one), computed from the document alone."""
    left = [position + 1 for position in first]
    i = j = count = 0
    while i < len(left) and j < len(second):
        if abs(left[i] - second[j]) <= slop:
            while i + 1 < len(left) and left[i + 1] <= second[j]:  # a later first word is a closer match
                i += 1
            count, i, j = count + 1, i + 1, j + 1
        elif left[i] < second[j]:
            i += 1
        else:
            j += 1
    return count


@dataclass
class RankedCandidate:
    """A document Tantivy returned, with the bounds of its exact score until that score is known."""

    url: str
    stats: TermStats
    low: float  # its phrases matching nowhere
    high: float  # each phrase matching as often as its rarer word: a phrase match needs both words
    bound: float = 0.0  # `high` as first known: what the pool is chosen by
    exact: bool = False
    text: Callable[[], tuple[str, str] | None] = field(default=lambda: None, repr=False)


class CandidatePool:
    """The candidates so far and the pool among them: those whose upper bound is at least the `pool`-th
    highest (its floor, kept by a `pool`-sized heap; ties at the floor are all in)."""

    def __init__(self, k: int, pool: int) -> None:
        self.k = k
        self.pool = pool
        self.candidates: dict[tuple[int, int], RankedCandidate] = {}
        self._bounds: list[float] = []  # a min-heap of the `pool` highest upper bounds
        # The pool, kept as candidates are added (in their order) and cut when the floor rises: reading
        # it is then about `pool` steps, not one per candidate (the candidates grow with near-duplicates).
        self._pooled: list[RankedCandidate] = []
        self._pooled_floor = -math.inf

    def add(self, key: tuple[int, int], candidate: RankedCandidate) -> None:
        candidate.bound = candidate.high
        self.candidates[key] = candidate
        if len(self._bounds) < self.pool:
            heapq.heappush(self._bounds, candidate.bound)
        elif candidate.bound > self._bounds[0]:
            heapq.heapreplace(self._bounds, candidate.bound)
        if candidate.bound >= self.floor():  # below it, never in the pool: the floor only rises
            self._pooled.append(candidate)

    def floor(self) -> float:
        """The `pool`-th highest upper bound (-inf before there are `pool`): a document whose bound is below
        it is not in the pool, now or later (the floor only rises)."""
        return self._bounds[0] if len(self._bounds) >= self.pool else -math.inf

    def pooled(self) -> list[RankedCandidate]:
        """The candidates in the pool now (it changes only as candidates are added), in the order they were."""
        floor = self.floor()
        if floor > self._pooled_floor:
            self._pooled = [c for c in self._pooled if c.bound >= floor]
            self._pooled_floor = floor
        return list(self._pooled)

    def kth(self, pooled: Sequence[RankedCandidate]) -> float:
        """The k-th best lower bound in the pool (-inf before there are k): the k-th best exact score of the
        pool is at least it."""
        lows = heapq.nlargest(self.k, (c.low for c in pooled))
        return lows[-1] if len(lows) >= self.k else -math.inf

    @staticmethod
    def most_promising(pooled: Sequence[RankedCandidate], kth: float) -> RankedCandidate | None:
        """The candidate of the pool not yet settled with the highest upper bound, if that bound reaches `kth`."""
        open_ = [c for c in pooled if not c.exact and c.high >= kth]
        return max(open_, key=lambda c: (c.high, c.url)) if open_ else None

    def settle(self, candidate: RankedCandidate, score: float) -> None:
        candidate.low = candidate.high = score
        candidate.exact = True

    def best(self) -> list[tuple[str, float]]:
        exact = [(c.url, c.low) for c in self.pooled() if c.exact]
        return sorted(exact, key=lambda hit: (-hit[1], hit[0]))[: self.k]


class ExactRanker:
    """The k best documents by BM25 over the caller's documents alone (see the module's docstring), among
    the `pool` whose upper bounds are the highest.

    Candidates come from Tantivy, best first, restricted to the caller's documents. Each is explained
    term by term (frequencies and its quantised length, microseconds each); its phrase counts, which need
    the document's own tokens, are computed only for the candidates that can still reach the top k. A
    document Tantivy did not return scores at most `factor` x its candidate score (`_bound`), so fetching
    stops once that bound is below the k-th lower bound, or below the pool's floor (the `pool`-th highest
    upper bound): equal is not enough, a tie is settled by url. The bounds, the floor and the exact scores
    are all of the caller's statistics, so the pool, like the ranking, is that of an index holding only the
    caller's documents; when no more than `pool` documents can reach the k-th score, the top k is exact.
    """

    def __init__(self, schema: Any, *, title_repeats: int, slop: int, words: Any, tokens: Any,
                 max_token_bytes: int) -> None:
        self._schema = schema
        self._title_repeats = title_repeats
        self._slop = slop
        # For a phrase's positions: the words before any filter, and the tokens of the analyzer without
        # its length filter, one for one (a token too long to index keeps its place).
        self._words = words
        self._tokens = tokens
        self._max_token_bytes = max_token_bytes
        self._long_word = re.compile(rf"\w{{{max_token_bytes + 1},}}", re.ASCII)

    def top(
        self,
        searcher: Any,
        clauses: Sequence[Clause],
        counts: CallerCounts,
        k: int,
        lengths: tuple[int, int],
        texts: Callable[[str], tuple[str, str] | None],
        pool: int = CANDIDATE_POOL,
    ) -> list[tuple[str, float]]:
        """The `k` best (url, score), ties by url. `lengths`: (the caller's documents' `text` tokens
        together, how many they are); `texts`: a document's (title, content) by url, None once deleted;
        `pool`: the candidates chosen among at most (the class's docstring; 0: no bound, always exact)."""
        tokens, documents = lengths
        if documents != counts.documents:
            raise StaleStatistics("SQLite and Tantivy disagree on the visible documents")
        if documents == 0:
            return []
        average = tokens / documents
        query, parts = self._candidates(clauses, counts)
        found = CandidatePool(k, max(k, pool) if pool > 0 else sys.maxsize)
        factor: float | None = None
        limit = k + TIE_MARGIN
        while True:
            hits = searcher.search(query, limit).hits
            for score, address in hits:
                key = (int(address.segment_ord), int(address.doc))
                if key in found.candidates:
                    continue
                # Exact scores raise the k-th lower bound: settling the best candidates before fetching
                # the next keeps the candidates few (they are cheap; the exact score is not).
                if factor is not None and factor * score < self._settle(found, clauses, average):
                    return found.best()
                url = str(searcher.doc(address)["url"][0])
                stats = self._term_stats(searcher, address, clauses)
                if factor is None:
                    factor = self._bound(parts, counts, stats, average)
                found.add(key, self._candidate(url, stats, clauses, average, functools.partial(texts, url)))
            if len(hits) < limit:  # every matching document is a candidate
                self._settle(found, clauses, average)
                return found.best()
            limit *= 4

    def _candidate(self, url: str, stats: TermStats, clauses: Sequence[Clause], average: float,
                   text: Callable[[], tuple[str, str] | None]) -> RankedCandidate:
        low = [stats.frequencies.get(c.tokens[0], 0.0) if len(c.tokens) == 1 else 0.0 for c in clauses]
        high = [stats.frequencies.get(c.tokens[0], 0.0) if len(c.tokens) == 1
                else min(stats.frequencies.get(t, 0.0) for t in c.tokens) for c in clauses]
        candidate = RankedCandidate(url, stats, bm25(clauses, low, stats.length, average),
                               bm25(clauses, high, stats.length, average), text=text)
        candidate.exact = candidate.low == candidate.high  # no phrase can match: its score is known
        return candidate

    def _settle(self, found: CandidatePool, clauses: Sequence[Clause], average: float) -> float:
        """Exact scores for every candidate of the pool that can still be among its k best, the one with the
        highest upper bound first, until every other's upper bound is below the pool's k-th lower bound;
        the higher of that bound and the pool's floor (a document Tantivy has not returned yet matters only
        if its upper bound reaches both)."""
        pooled = found.pooled()
        while True:
            kth = found.kth(pooled)
            candidate = found.most_promising(pooled, kth)
            if candidate is None:
                return max(kth, found.floor())
            found.settle(candidate, self._exact_score(candidate, clauses, average))

    def _exact_score(self, candidate: RankedCandidate, clauses: Sequence[Clause], average: float) -> float:
        text = candidate.text()
        if text is None:  # deleted since the search: the index's reader drops it afterwards, as it would anyway
            return candidate.low
        wanted = {token for clause in clauses if len(clause.tokens) > 1 for token in clause.tokens}
        positions = self.positions(*text, wanted)
        frequencies = [
            candidate.stats.frequencies.get(c.tokens[0], 0.0) if len(c.tokens) == 1
            else float(phrase_count(positions[c.tokens[0]], positions[c.tokens[1]], self._slop))
            for c in clauses
        ]
        return bm25(clauses, frequencies, candidate.stats.length, average)

    def _candidates(self, clauses: Sequence[Clause], counts: CallerCounts) -> tuple[Any, list[tuple[float, float, str]]]:  # noqa: E501
        """The query that finds the candidates, and per clause (its exact weight, its boost in that query,
        the token whose Tantivy IDF the boost multiplies).

        A term clause is the ranking's own. A phrase clause is not: Tantivy's phrase count of a document
        depends on what else its segment holds (the same page counted 1 or 2 matches in two indexes), so
        the exact score counts phrases itself, and the candidate query stands in for each phrase with
        its rarer word, required with the other, boosted to the phrase's weight: a phrase matches at most
        as often as either of its words, so its exact score is at most that word's at the phrase's weight.
        """
        parts: list[tuple[float, float, str]] = []
        should = []
        for clause in clauses:
            exact = clause.weight * clause.idf
            if len(clause.tokens) == 1:
                parts.append((exact, clause.boost, clause.tokens[0]))
                should.append((tantivy.Occur.Should, tantivy.Query.boost_query(clause.query, clause.boost)))
                continue
            anchor, other = sorted(clause.tokens, key=lambda token: (counts.whole(token), token))
            boost = exact / counts.tantivy_idf([anchor], counts.whole_documents)
            both = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, tantivy.Query.term_query(self._schema, "text", anchor)),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(
                    tantivy.Query.term_query(self._schema, "text", other), 0.0)),
            ])  # fmt: skip
            parts.append((exact, boost, anchor))
            should.append((tantivy.Occur.Should, tantivy.Query.boost_query(both, boost)))
        return counts.restricted(tantivy.Query.boolean_query(should)), parts

    @staticmethod
    def _bound(parts: Sequence[tuple[float, float, str]], counts: CallerCounts, stats: TermStats,
               average: float) -> float:
        """How many times its candidate score a document's exact score may be, at most.

        Per clause, f / (f + K) with the caller's average length is between 1 and K_tantivy / K_visible
        times Tantivy's, and that lies between 1 and rho = visible / Tantivy average length (the same f
        and quantised dl in both). A clause's exact weight and its Tantivy weight (boost x Tantivy's IDF)
        differ by the float32 rounding of the boost and, with deleted documents not yet merged away, by
        Tantivy's N counting them: the bound takes the largest ratio of the two, plus float32 slack.
        """
        ratios = [
            exact / (boost * counts.tantivy_idf([token], stats.tantivy_documents))
            for exact, boost, token in parts
            if boost > 0
        ]
        return max(1.0, average / stats.tantivy_average) * max(ratios, default=1.0) * (1.0 + BOUND_SLACK)

    def _term_stats(self, searcher: Any, address: Any, clauses: Sequence[Clause]) -> TermStats:
        """The document's frequency of each term clause and its length, from Tantivy's explanation of each
        term alone (one explanation of the whole query builds the union's scorer over a window of
        documents: milliseconds a document at 100,000)."""
        frequencies: dict[str, float] = {}
        document: dict[str, float] = {}  # dl, avgdl and N: the same in every term clause's explanation
        explained_any = False
        for clause in clauses:
            if len(clause.tokens) != 1:
                continue
            try:
                explanation = clause.query.explain(searcher, address)
            except ValueError:  # the document does not hold this term
                frequencies[clause.tokens[0]] = 0.0
                continue
            explained_any = True
            try:
                explained = explained_stats(explanation.to_json())
            except (AttributeError, TypeError, ValueError) as exc:
                raise UnreadableStatistics(f"Tantivy's explanation cannot be read ({exc})") from None
            if "freq" not in explained:
                raise UnreadableStatistics("Tantivy's explanation of a matching term names no freq")
            frequencies[clause.tokens[0]] = explained.pop("freq")
            document.update(explained)
        if not explained_any:
            raise StaleStatistics("a hit that no term of its query explains")
        if not {"dl", "avgdl", "N"} <= document.keys():
            missing = ", ".join(sorted({"dl", "avgdl", "N"} - document.keys()))
            raise UnreadableStatistics(f"Tantivy's explanation names no {missing}")
        return TermStats(frequencies, document["dl"], int(document["N"]), document["avgdl"])

    def positions(self, title: str, content: str, wanted: set[str]) -> dict[str, list[int]]:
        """The positions Tantivy indexes each `wanted` token of a document at (the mirror's text: the title
        `title_repeats` times, then the content)."""
        found: dict[str, list[int]] = {token: [] for token in wanted}
        offset = 0
        parts = [self._analyzed(title)] * self._title_repeats + [self._analyzed(content)]
        for tokens, too_long in parts:
            for position, token in enumerate(tokens):
                if token in found and position not in too_long:
                    found[token].append(offset + position)
            offset += len(tokens)
        return found

    def _analyzed(self, text: str) -> tuple[list[str], frozenset[int]]:
        """`text`'s tokens, each at the position Tantivy gives it, and the positions of the words too long
        to index (Tantivy drops the token, not its place)."""
        tokens = self._tokens.analyze(text)
        # ASCII text without a word longer than the limit (most text) needs no second pass for the words.
        if text.isascii() and self._long_word.search(text) is None:
            return tokens, frozenset()
        words = self._words.analyze(text)
        return tokens, frozenset(i for i, word in enumerate(words) if len(word.encode("utf-8")) > self._max_token_bytes)
