"""The embedded index's ranking engine: a Tantivy inverted index mirroring the SQLite documents.

SQLite FTS5 scores every matching document, and a typical OR-question matches most of a corpus;
Tantivy's block-max WAND only scores documents that can still enter the top k, which is what keeps
search fast at 100,000 documents. SQLite stays the source of truth: this directory holds nothing
that cannot be rebuilt from it, and a sync marker (the SQLite write generation and document count
it reflects) says whether it may be trusted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import tantivy

# Bumped whenever the schema, analyzer or field text below changes: an older directory is rebuilt.
MIRROR_FORMAT = 2
_MARKER = "evident-sync.json"
_ANALYZER = "evident_en"
_WRITER_HEAP = 128_000_000
_WRITER_WAIT_S = 10.0  # another process commits its own mirror right after its SQLite write
_MAX_TOKEN_LENGTH = 64  # as fts_query.MAX_TERM_LENGTH: longer tokens are junk
_TIE_MARGIN = 64  # extra hits fetched so that ties at the k-th place are usually resolved in one go


class MirrorError(Exception):
    """The Tantivy directory cannot be opened or written; the caller falls back to SQLite."""


def _analyzer() -> Any:
    # Close to the FTS5 tokenizer it replaces ("porter unicode61 remove_diacritics 2"): unicode
    # word splitting, case folding, diacritics folded, English (Porter) stemming. Words are `\w+`
    # as in fts_query, marks included: the simple tokenizer would cut Devanagari words at vowel signs.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"\w+"))
        .filter(tantivy.Filter.remove_long(_MAX_TOKEN_LENGTH + 1))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> Any:
    builder = tantivy.SchemaBuilder()
    # Raw and stored: the exact URL is both the delete key and what a hit is resolved by.
    builder.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="freq")
    return builder.build()


def _idf_ratio(x: float) -> float:
    return max(math.log(x), 1e-6) / math.log1p(x)


class TantivyMirror:
    """A Tantivy index in `directory` holding the url and text of every SQLite document."""

    def __init__(self, directory: Path, *, title_weight: float) -> None:
        self.directory = directory
        # One field holding the title `title_repeats` times, then the content: term frequency is
        # then FTS5's weighted one (4 x title + content), so the ranking matches the FTS5 BM25 that
        # the answer pipeline was tuned on. Separate per-field BM25 with a title boost measured
        # worse (BM25 top-1 on the example questions 69% instead of 79%): a short title field
        # saturates quickly and the boost then outweighs the content.
        self.title_repeats = max(1, round(title_weight))
        self._schema = _schema()
        self._analyzer = _analyzer()
        self._index: Any | None = None
        self._writer: Any | None = None

    # -- state ---------------------------------------------------------------------------------

    def marker(self) -> tuple[int, int] | None:
        """(generation, documents) this directory was last committed at, None when unknown."""
        try:
            data = json.loads((self.directory / _MARKER).read_text(encoding="utf-8"))
            if data.get("format") != MIRROR_FORMAT:
                return None
            return int(data["generation"]), int(data["documents"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def in_sync(self, generation: int, documents: int) -> bool:
        """Whether the directory reflects SQLite at `generation` with `documents` rows."""
        if self.marker() != (generation, documents):
            return False
        try:
            index = self._open(create=False)
            index.reload()
            return int(index.searcher().num_docs) == documents
        except (MirrorError, OSError, ValueError):
            return False

    def _open(self, *, create: bool) -> Any:
        if self._index is not None:
            return self._index
        if not create and not (self.directory / "meta.json").exists():
            raise MirrorError(f"{self.directory}: no Tantivy index")
        try:
            self.directory.mkdir(parents=True, exist_ok=True) if create else None
            index = tantivy.Index(self._schema, path=str(self.directory), reuse=True)
            index.register_tokenizer(_ANALYZER, self._analyzer)
        except (OSError, ValueError) as exc:
            raise MirrorError(f"{self.directory}: cannot open Tantivy index ({exc})") from None
        self._index = index
        return index

    # -- reading -------------------------------------------------------------------------------

    def refresh(self) -> None:
        """See commits made since the last search (by this object or another process)."""
        self._open(create=False).reload()

    def top(self, terms: Sequence[str], k: int) -> list[tuple[str, float]]:
        """The `k` best (url, score) for OR-ed `terms`, best first, ties by url."""
        searcher = self._open(create=False).searcher()
        query = self._query(terms, searcher)
        if query is None or k <= 0:
            return []
        limit = k + _TIE_MARGIN
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

    def _query(self, terms: Sequence[str], searcher: Any) -> Any | None:
        # Built from analyzed tokens and term queries, never through Tantivy's query parser, so no
        # user text is ever read as query syntax.
        tokens: list[str] = []
        for term in terms:
            for token in self._analyzer.analyze(term):
                if token and token not in tokens:
                    tokens.append(token)
        if not tokens:
            return None
        documents = int(searcher.num_docs)
        clauses = []
        for token in tokens:
            query = tantivy.Query.term_query(self._schema, "text", token)
            # Tantivy's IDF is ln(1 + x), FTS5's ln(x) floored at 1e-6, x = (N - n + 0.5) / (n + 0.5):
            # FTS5 all but ignores words in half the documents or more. Boosting by the ratio gives
            # FTS5's weights, which measured better on the example questions than Tantivy's own.
            matching = int(searcher.doc_freq("text", token))
            x = (documents - matching + 0.5) / (matching + 0.5)
            clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(query, _idf_ratio(x))))
        return tantivy.Query.boolean_query(clauses)

    # -- writing -------------------------------------------------------------------------------

    def _writer_for_batch(self) -> Any:
        if self._writer is None:
            index = self._open(create=True)
            deadline = time.monotonic() + _WRITER_WAIT_S
            while True:
                try:
                    self._writer = index.writer(_WRITER_HEAP, 1)
                    break
                except ValueError as exc:  # the directory lock is held by another writer
                    if time.monotonic() > deadline:
                        raise MirrorError(f"{self.directory}: cannot lock for writing ({exc})") from None
                    time.sleep(0.05)
        return self._writer

    def delete(self, urls: Iterable[str]) -> None:
        writer = self._writer_for_batch()
        for url in urls:
            writer.delete_documents_by_term("url", url)

    def add(self, url: str, title: str, content: str) -> None:
        text = "\n".join([title] * self.title_repeats + [content])
        self._writer_for_batch().add_document(tantivy.Document(url=url, text=text))

    def replace(self, url: str, title: str, content: str) -> None:
        # Deletes apply to documents added before them, so the new version survives its own delete.
        self.delete([url])
        self.add(url, title, content)

    def commit(self, generation: int, documents: int) -> None:
        """Make the batch visible and record which SQLite state the directory now reflects."""
        writer = self._writer_for_batch()
        self._writer = None
        try:
            writer.commit()
            writer.wait_merging_threads()  # also releases the directory lock for other writers
        except (OSError, ValueError) as exc:
            raise MirrorError(f"{self.directory}: commit failed ({exc})") from None
        self._write_marker(generation, documents)
        self.refresh()

    def rollback(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError, ValueError):
                writer.rollback()
                writer.wait_merging_threads()

    def _write_marker(self, generation: int, documents: int) -> None:
        data = {"format": MIRROR_FORMAT, "generation": generation, "documents": documents}
        temporary = self.directory / f"{_MARKER}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temporary, self.directory / _MARKER)  # atomic: readers see the old or the new

    def rebuild(self, rows: Iterable[tuple[str, str, str]], generation: int, documents: int) -> None:
        """Replace the directory's content with `rows` (url, title, content)."""
        self.rollback()
        self._index = None
        # From scratch: what is there may be unreadable, or of another format or Tantivy version.
        shutil.rmtree(self.directory, ignore_errors=True)
        self._open(create=True)
        try:
            for url, title, content in rows:
                self.add(url, title, content)
        except BaseException:
            self.rollback()
            raise
        self.commit(generation, documents)

    def close(self) -> None:
        self.rollback()
        self._index = None
