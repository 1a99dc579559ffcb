"""The embedded index's ranking engine: a Tantivy inverted index mirroring the SQLite documents.

SQLite FTS5 scores every matching document, and a typical OR-question matches most of a corpus;
Tantivy's block-max WAND only scores documents that can still enter the top k, which is what keeps
search fast at 100,000 documents. SQLite stays the source of truth: this directory holds nothing
that cannot be rebuilt from it, and a sync marker (the SQLite write generation and document count
it reflects, and a CRC-32 of every file of the committed index) says whether it may be trusted.
A damaged file is found when the directory is opened (checksums, document count) or, failing that,
when Tantivy reports it: its errors, and its Rust panics, become `MirrorError`, and the owner
rebuilds the directory from SQLite. An explanation of a score in a format the exact ranking cannot read
is not damage: that search is ranked by Tantivy's own scores (`TantivyMirror.top`), and the log says why.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import tantivy

from evident.alignment.lexicon import SEARCH_STOPWORDS, content_terms, stem
from evident.connectors.index.spelling import REPAIR_WEIGHT, REPAIRS_PER_QUERY, repair
from evident.connectors.index.visible_ranking import (
    CANDIDATE_POOL,
    TIE_MARGIN,
    CallerCounts,
    Clause,
    Counted,
    ExactRanker,
    StaleStatistics,
    UnreadableStatistics,
)
from evident.connectors.visibility import ANONYMOUS_TOKENS
from evident.conversation.asking import CHAT, MAX_TERM_LENGTH

log = logging.getLogger(__name__)

# Bumped whenever the schema, analyzer, field text or marker below changes: an older directory is rebuilt.
# 4: the title is repeated 20 times (index.TITLE_WEIGHT), not 4. 5: word positions (phrase clauses).
# 6: the `acl` field of visibility tokens (permissions inside the search). 7: SQLite's `text_tokens`
# (filled by the rebuild).
MIRROR_FORMAT = 7
_MARKER = "evident-sync.json"
_ANALYZER = "evident_en"
_WRITER_HEAP = 128_000_000
_WRITER_WAIT_S = 10.0  # another process commits its own mirror right after its SQLite write
_MAX_TOKEN_LENGTH = MAX_TERM_LENGTH  # longer tokens are junk
_WORD = r"\w+"
# Proximity: each two consecutive search terms of the query (stopwords, greetings and repeats left
# out, see asking.weighted_terms) also count as a phrase, in that order and at most PHRASE_SLOP
# words apart in the document ("apply retirement" matches "apply for retirement", not "retirement:
# apply"), weighted PHRASE_BOOST x the lighter word's weight. A page saying the question's words
# together is about them; one that has them scattered mostly is not. Measured on the development
# set's tune part (slop 0/1/2, boost 0.1 to 1.0; docs/evaluation.md, "How the offline engine decides").
PHRASE_SLOP = 1
PHRASE_BOOST = 0.3
# Title first: among the pages retrieved, the one whose title the question names most fully goes
# first, by its score x (1 + TITLE_FIRST_BOOST x the share of its title's words the question holds);
# the others keep their order. "Request parental leave" is the page for "I want to request parental
# leave", above a longer page that uses the words more often. Only the first place
# moves: re-ranking every place by the title pushed pages that answer in their text below siblings
# named like the question ("Teacher Loan Forgiveness" for "loan forgiveness"), where the extractor's
# rank prior no longer quotes them (boost swept 0.3/0.4/0.5/0.6/0.7; docs/evaluation.md, "How the
# offline engine decides").
TITLE_FIRST_BOOST = 0.5
# The pages it chooses among, whatever the number asked for: the first page must not depend on k (8
# is EvidenT's default top_n, on which rule 42 was measured).
TITLE_FIRST_DEPTH = 8
COUNTS_CACHED = 64  # (state of the index, token set) pairs whose visible counts are kept


def _tantivy_version() -> str:
    try:
        return importlib.metadata.version("tantivy")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def title_share(question: frozenset[str], title: str) -> float:
    """The share of `title`'s content words (stemmed) that `question` (stemmed keys) holds."""
    keys = {stem(word) for word in content_terms(title)}
    return len(keys & question) / len(keys) if keys else 0.0


def title_first(terms: Sequence[str], hits: Sequence[tuple[str, float]], boost: float = TITLE_FIRST_BOOST) -> int:
    """The index in `hits` ((title, score), best first) of the hit that goes first (`boost`: see
    `TITLE_FIRST_BOOST`; 0 keeps the first)."""
    question = frozenset(stem(word) for word in content_terms(" ".join(terms)))
    best, lead = 0, -1.0
    for i, (title, score) in enumerate(hits):
        boosted = score * (1.0 + boost * title_share(question, title))
        if boosted > lead:
            best, lead = i, boosted
    return best


class MirrorError(Exception):
    """The Tantivy directory cannot be opened, read or written; the caller rebuilds it or uses SQLite."""


@contextlib.contextmanager
def tantivy_errors(directory: Path) -> Iterator[None]:
    """Turn whatever Tantivy raises on a damaged or locked directory into `MirrorError`.

    A Rust panic reaches Python as pyo3's `PanicException`, which derives from `BaseException`, not
    `Exception` (so `except Exception` lets it through and it ends the process's query with a
    backtrace); it is recognised by name because pyo3 does not export the class.
    """
    try:
        yield
    except MirrorError:
        raise
    except (OSError, ValueError, RuntimeError) as exc:
        raise MirrorError(f"{directory}: {exc}") from None
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
        raise MirrorError(f"{directory}: Tantivy panicked ({first})") from None


def _analyzer(*, bounded: bool = True) -> Any:
    # Close to the FTS5 tokenizer it replaces ("porter unicode61 remove_diacritics 2"): unicode
    # word splitting, case folding, diacritics folded, English (Snowball) stemming. Words are `\w+` as
    # in the lexicon's words, marks included: the simple tokenizer would cut Devanagari words at vowel signs.
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(_WORD))
    if bounded:
        builder = builder.filter(tantivy.Filter.remove_long(_MAX_TOKEN_LENGTH + 1))
    return (
        builder
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> Any:
    builder = tantivy.SchemaBuilder()
    # Raw and stored: the exact URL is both the delete key and what a hit is resolved by.
    builder.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    # Positions, not only frequencies: the phrase clauses of `TantivyMirror._query` need them.
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="position")
    # The document's visibility tokens (`evident.connectors.visibility.document_tokens`), one value each.
    builder.add_text_field("acl", tokenizer_name="raw", index_option="basic")
    return builder.build()


class TantivyMirror:
    """A Tantivy index in `directory` holding the url and text of every SQLite document."""

    def __init__(self, directory: Path, *, title_weight: float) -> None:
        self.directory = directory
        # One field holding the title `title_repeats` times, then the content: term frequency is
        # then FTS5's weighted one (TITLE_WEIGHT x title + content), so both rank alike. Separate
        # per-field BM25 with a title boost measured worse (BM25 top-1 on the example questions 69%
        # instead of 79%): a short title field saturates quickly and the boost then outweighs the content.
        self.title_repeats = max(1, round(title_weight))
        self.schema = _schema()
        self._analyzer = _analyzer()
        self._exact = ExactRanker(
            self.schema, title_repeats=self.title_repeats, slop=PHRASE_SLOP,
            words=tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(_WORD)).build(),
            tokens=_analyzer(bounded=False), max_token_bytes=_MAX_TOKEN_LENGTH,
        )  # fmt: skip
        self._index: Any | None = None
        self._writer: Any | None = None
        self._chat_tokens: frozenset[str] | None = None
        self._counted: dict[tuple[int, int, int, frozenset[str]], Counted] = {}
        self._unreadable_logged = False  # the fallback of `top` is logged once per mirror, not per search

    # -- state ---------------------------------------------------------------------------------

    def marker(self) -> tuple[int, int] | None:
        """(generation, documents) this directory was last committed at, None when unknown."""
        data = self._marker_data()
        return None if data is None else (int(data["generation"]), int(data["documents"]))

    def _marker_data(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.directory / _MARKER).read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != MIRROR_FORMAT:
                return None
            int(data["generation"]), int(data["documents"]), dict(data["files"])
            return data
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def in_sync(self, generation: int, documents: int) -> bool:
        """Whether the directory reflects SQLite at `generation` with `documents` rows, undamaged."""
        data = self._marker_data()
        if data is None or (int(data["generation"]), int(data["documents"])) != (generation, documents):
            return False
        try:
            if self._checksums() != data["files"]:
                return False
            with tantivy_errors(self.directory):
                index = self._open(create=False)
                index.reload()
                return int(index.searcher().num_docs) == documents
        except (MirrorError, OSError, ValueError, KeyError, TypeError):
            return False

    def _index_files(self) -> list[str]:
        """The files of the committed index: meta.json and the files of the segments it lists."""
        meta = json.loads((self.directory / "meta.json").read_text(encoding="utf-8"))
        prefixes = tuple(str(segment["segment_id"]).replace("-", "") + "." for segment in meta["segments"])
        names = [entry.name for entry in os.scandir(self.directory) if entry.name.startswith(prefixes)]
        return ["meta.json", *sorted(names)] if prefixes else ["meta.json"]

    def _checksums(self, known: dict[str, Any] | None = None) -> dict[str, list[int]]:
        """name -> [size, CRC-32] of the index files; segment files are immutable, so a file of
        the same name and size in `known` keeps its checksum (meta.json is always read)."""
        out: dict[str, list[int]] = {}
        for name in self._index_files():
            path = self.directory / name
            size = path.stat().st_size
            previous = (known or {}).get(name)
            if name != "meta.json" and isinstance(previous, list) and len(previous) == 2 and previous[0] == size:
                out[name] = [size, int(previous[1])]
                continue
            crc = 0
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    crc = zlib.crc32(chunk, crc)
            out[name] = [size, crc]
        return out

    def _open(self, *, create: bool) -> Any:
        if self._index is not None:
            return self._index
        if not create and not (self.directory / "meta.json").exists():
            raise MirrorError(f"{self.directory}: no Tantivy index")
        try:
            self.directory.mkdir(parents=True, exist_ok=True) if create else None
            with tantivy_errors(self.directory):
                index = tantivy.Index(self.schema, path=str(self.directory), reuse=True)
                index.register_tokenizer(_ANALYZER, self._analyzer)
        except (MirrorError, OSError) as exc:
            raise MirrorError(f"{self.directory}: cannot open Tantivy index ({exc})") from None
        self._index = index
        return index

    # -- reading -------------------------------------------------------------------------------

    def searcher(self) -> Any:
        """A Tantivy searcher of the last commit refreshed."""
        return self._open(create=False).searcher()

    def positions(self, title: str, content: str, wanted: set[str]) -> dict[str, list[int]]:
        """The positions Tantivy indexes each `wanted` token of a document at."""
        return self._exact.positions(title, content, wanted)

    def refresh(self) -> None:
        """See commits made since the last search (by this object or another process)."""
        index = self._open(create=False)
        with tantivy_errors(self.directory):
            index.reload()

    def top(
        self,
        terms: Sequence[str],
        k: int,
        weights: Mapping[str, float] | None = None,
        *,
        visible: Sequence[str] | None = None,
        lengths: Callable[[], tuple[int, int]] | None = None,
        texts: Callable[[str], tuple[str, str] | None] | None = None,
        generation: int | None = None,
        pool: int = CANDIDATE_POOL,
    ) -> list[tuple[str, float]]:
        """The `k` best (url, score) for OR-ed `terms`, best first, ties by url; a term's score is
        multiplied by its weight in `weights` (default 1). With `visible`, only documents holding one
        of those visibility tokens are searched, and counted in the IDF and the spelling repair;
        `lengths` and `texts` then give the statistics of its exact ranking (`visible_ranking.ExactRanker`).
        `generation`: the SQLite generation the directory reflects; with it, the visible counts are kept
        for the next search of the same token set while the searcher holds the same documents; `pool`: the
        candidates its exact ranking chooses among at most (`visible_ranking.CANDIDATE_POOL`)."""
        searcher = self.searcher()
        counts = CallerCounts(self.schema, searcher, visible, self._known_counts(searcher, visible, generation))
        built = self._query(terms, counts, weights or {})
        if built is None or k <= 0:
            return []
        query, clauses = built
        # Rescored whenever a signed-in caller searches, or the filter hides anything: so one caller takes
        # the same path over a corpus with documents hidden from them as over the same corpus without
        # them. The anonymous search of a corpus hiding nothing (the development set's) keeps Tantivy's scores.
        signed_in = not ANONYMOUS_TOKENS.issuperset(visible or ())
        if visible is not None and (signed_in or counts.documents < counts.whole_documents):
            if lengths is None or texts is None:
                raise TypeError("a filtered search needs the visible documents' lengths and texts")
            try:
                return self._exact.top(searcher, clauses, counts, k, lengths(), texts, pool)
            except StaleStatistics as exc:
                raise MirrorError(f"{self.directory}: {exc}") from None
            except UnreadableStatistics as exc:
                # The index is sound: ranked below by Tantivy's own scores, with the caller's IDF (the
                # clauses' boosts) but the whole index's average length and Tantivy's phrase counts.
                if not self._unreadable_logged:
                    self._unreadable_logged = True
                    log.warning("%s: cannot rescore searches that permissions limit (%s; tantivy %s): ranking "
                                "them by Tantivy's own scores over the caller's documents", self.directory, exc,
                                _tantivy_version())
        limit = k + TIE_MARGIN
        while True:
            hits = searcher.search(query, limit).hits
            # Documents tied with the k-th may lie beyond what was fetched: fetch until the last hit
            # scores below the k-th, so that the url order among tied documents is complete.
            if len(hits) < limit or hits[k - 1][0] != hits[-1][0]:
                break
            limit *= 4
        cut = hits[k - 1][0] if len(hits) >= k else None
        found = [
            (searcher.doc(address)["url"][0], float(score))
            for score, address in hits
            if cut is None or score >= cut
        ]
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:k]

    def _known_counts(self, searcher: Any, visible: Sequence[str] | None, generation: int | None) -> Counted | None:
        """The counts kept for `visible` in the searcher's state: its generation, and its document and
        segment counts, which change with any commit a searcher that reloads by itself may already see."""
        if visible is None or generation is None:
            return None
        key = (generation, int(searcher.num_docs), int(searcher.num_segments), frozenset(visible))
        if key not in self._counted:
            if len(self._counted) >= COUNTS_CACHED:
                self._counted.clear()
            self._counted[key] = Counted()
        return self._counted[key]

    def _query(
        self, terms: Sequence[str], counts: CallerCounts, weights: Mapping[str, float]
    ) -> tuple[Any, list[Clause]] | None:
        # Built from analyzed tokens and term queries, never through Tantivy's query parser, so no
        # user text is ever read as query syntax.
        tokens: dict[str, float] = {}
        sequence: list[tuple[str, float]] = []  # the query's tokens in order, for the phrase clauses
        repairs = 0  # of REPAIRS_PER_QUERY
        for term in terms:
            searched, repaired = self._searched_as(term, weights.get(term, 1.0), counts, repairs < REPAIRS_PER_QUERY)
            repairs += repaired
            for token, weight in searched:
                tokens[token] = max(tokens.get(token, 0.0), weight)
                sequence.append((token, weight))
        if not tokens:
            return None
        clauses = []
        for token, weight in tokens.items():
            query = tantivy.Query.term_query(self.schema, "text", token)
            # Tantivy's IDF is ln(1 + x), FTS5's ln(x), x = (N - n + 0.5) / (n + 0.5): boosting by the ratio
            # gives FTS5's weights (better on the example questions than Tantivy's own), floored at
            # visible_ranking.IDF_FLOOR, since FTS5 all but ignores words in half the documents or more (rule 53).
            # N and n are the visible documents' (`CallerCounts`), Tantivy's own IDF is divided out.
            boost = counts.idf_boost([token], fts=True) * weight
            clauses.append(Clause((token,), weight, counts.visible_idf([token], fts=True), boost, query))
        clauses += self._phrase_clauses(sequence, counts)
        either = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.boost_query(clause.query, clause.boost)) for clause in clauses]
        )
        return counts.restricted(either), clauses

    def _searched_as(
        self, term: str, weight: float, counts: CallerCounts, may_repair: bool
    ) -> tuple[list[tuple[str, float]], bool]:
        """The index tokens `term` is searched as, with their weights: its own, or, for a word no
        document holds and when `may_repair`, the nearest indexed one at REPAIR_WEIGHT
        (`spelling.repair`); and whether a repair was tried (it counts toward REPAIRS_PER_QUERY)."""
        own = [(token, weight) for token in self._analyzer.analyze(term) if token]
        if not may_repair or len(own) != 1 or not term.isalpha() or counts.holding(own[0][0]) > 0:
            return own, False
        repaired = repair(own[0][0], counts.holding)
        if repaired is None or repaired in self._unsearchable():
            return own, True
        return [(repaired, weight * REPAIR_WEIGHT)], True

    def _unsearchable(self) -> frozenset[str]:
        """The tokens of stopwords and greeting words: a repair landing on one ("whant" -> "what",
        "want") would search a word the query analysis deliberately left out."""
        if self._chat_tokens is None:
            words = SEARCH_STOPWORDS | CHAT
            self._chat_tokens = frozenset(token for word in words for token in self._analyzer.analyze(word))
        return self._chat_tokens

    def _phrase_clauses(self, sequence: Sequence[tuple[str, float]], counts: CallerCounts) -> list[Clause]:
        """A Should clause per distinct pair of consecutive query tokens (see PHRASE_SLOP), its IDF
        (Tantivy's: the sum of its words') taken over the visible documents."""
        clauses = []
        seen: set[tuple[str, str]] = set()
        for (first, first_weight), (second, second_weight) in zip(sequence, sequence[1:], strict=False):
            weight = min(first_weight, second_weight)
            if first == second or (first, second) in seen or weight <= 0:
                continue
            seen.add((first, second))
            phrase = tantivy.Query.phrase_query(self.schema, "text", [first, second], slop=PHRASE_SLOP)
            boost = PHRASE_BOOST * weight * counts.idf_boost([first, second], fts=False)
            idf = counts.visible_idf([first, second], fts=False)
            clauses.append(Clause((first, second), PHRASE_BOOST * weight, idf, boost, phrase))
        return clauses

    # -- writing -------------------------------------------------------------------------------

    def _writer_for_batch(self) -> Any:
        if self._writer is None:
            index = self._open(create=True)
            deadline = time.monotonic() + _WRITER_WAIT_S
            while True:
                try:
                    with tantivy_errors(self.directory):
                        self._writer = index.writer(_WRITER_HEAP, 1)
                    break
                except MirrorError as exc:  # mostly: the directory lock is held by another writer
                    if time.monotonic() > deadline:
                        raise MirrorError(f"{self.directory}: cannot lock for writing ({exc})") from None
                    time.sleep(0.05)
        return self._writer

    def delete(self, urls: Iterable[str]) -> None:
        writer = self._writer_for_batch()
        with tantivy_errors(self.directory):
            for url in urls:
                writer.delete_documents_by_term("url", url)

    def text_tokens(self, title: str, content: str) -> int:
        """How many tokens the `text` field of a document `add` indexes has: what Tantivy counts as its
        length (before quantising it to a fieldnorm), and what a caller's average field length sums."""
        # The title's tokens once, times its repeats: the newlines between the repeats split no token.
        return self.title_repeats * len(self._analyzer.analyze(title)) + len(self._analyzer.analyze(content))

    def add(self, url: str, title: str, content: str, acl: Sequence[str]) -> None:
        """Index a document; `acl`: its visibility tokens (none: nobody may see it)."""
        text = "\n".join([title] * self.title_repeats + [content])
        writer = self._writer_for_batch()
        with tantivy_errors(self.directory):
            writer.add_document(tantivy.Document(url=url, text=text, acl=list(acl)))

    def replace(self, url: str, title: str, content: str, acl: Sequence[str]) -> None:
        # Deletes apply to documents added before them, so the new version survives its own delete.
        self.delete([url])
        self.add(url, title, content, acl)

    def commit(self, generation: int, documents: int) -> None:
        """Make the batch visible and record which SQLite state the directory now reflects."""
        writer = self._writer_for_batch()
        self._writer = None
        try:
            with tantivy_errors(self.directory):
                writer.commit()
                writer.wait_merging_threads()  # also releases the directory lock for other writers
        except MirrorError as exc:
            raise MirrorError(f"commit failed ({exc})") from None
        self._write_marker(generation, documents)
        self.refresh()

    def rollback(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(MirrorError), tantivy_errors(self.directory):
                writer.rollback()
                writer.wait_merging_threads()

    def _write_marker(self, generation: int, documents: int) -> None:
        previous = self._marker_data()
        data = {"format": MIRROR_FORMAT, "generation": generation, "documents": documents,
                "files": self._checksums(previous["files"] if previous else None)}
        temporary = self.directory / f"{_MARKER}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temporary, self.directory / _MARKER)  # atomic: readers see the old or the new

    def rebuild(self, rows: Iterable[tuple[str, str, str, Sequence[str]]], generation: int, documents: int) -> None:
        """Replace the directory's content with `rows` (url, title, content, visibility tokens)."""
        self.rollback()
        self._index = None
        # From scratch: what is there may be unreadable, or of another format or Tantivy version.
        shutil.rmtree(self.directory, ignore_errors=True)
        self._open(create=True)
        try:
            for url, title, content, acl in rows:
                self.add(url, title, content, acl)
        except BaseException:
            self.rollback()
            raise
        self.commit(generation, documents)

    def close(self) -> None:
        self.rollback()
        self._index = None
