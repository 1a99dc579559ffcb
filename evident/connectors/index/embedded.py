"""The embedded default retrieval: SQLite documents ranked by BM25 through a Tantivy index.

SQLite ships with Python and needs no server; it stores the documents and tracks what changed, so
indexing is incremental per file (mtime + size, then content) and refreshing a large unchanged
corpus costs one `stat` per file. Every change is mirrored into a Tantivy index beside the file
(`<index>.tantivy/`, kept consistent by `mirrored.MirroredStore`), whose top-k BM25 (block-max WAND)
stays fast where FTS5, which scores every match, does not. BM25 is what a lexical verifier downstream
wants anyway: documents that share the question's words. The FTS5 table is kept as the fallback
while the Tantivy directory cannot be trusted (missing, stale or damaged: `fts_query`).

A refresh of a set of corpus paths is one transaction, so a failure (a vanished path, a broken JSONL
line, a URL claimed by two files, no documents at all) leaves the previous index as it was;
`rebuild_index` builds a damaged index anew from its sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from filelock import FileLock, Timeout

if TYPE_CHECKING:
    from evident.embeddings.scorer import SemanticScorer

from evident.alignment.models import SourceDocument
from evident.connectors.hybrid import Candidate, hybrid_ranking
from evident.connectors.index.corpus import IndexStats, url_conflict
from evident.connectors.index.excluded import page_copies
from evident.connectors.index.fts_query import fts_search
from evident.connectors.index.loaders import (
    DEFAULT_LIMITS,
    CorpusError,
    CorpusLimits,
    SkipHandler,
    copy_of,
    corpus_files,
    file_text,
    load_file,
    log_skip,
    relative_path,
)
from evident.connectors.index.mirrored import MirroredStore
from evident.connectors.index.ranking import TITLE_FIRST_BOOST, TITLE_FIRST_DEPTH, title_first
from evident.connectors.index.schema import store_visibility
from evident.connectors.index.skip_records import SkipRecords, file_stat
from evident.connectors.index.store import IndexFileError, WriteLock, _transaction
from evident.connectors.index.vectors import (
    STEP_WINDOWS,
    EmbedProgress,
    EmbedStats,
    LoadedVectors,
    embed_missing,
    load_vectors,
    ranked_by_meaning,
    stored_model,
    unembedded,
    vectors_generation,
    vectors_key,
)
from evident.connectors.index.visible_ranking import CANDIDATE_POOL
from evident.connectors.revisions import REVISION
from evident.connectors.visibility import document_tokens
from evident.conversation.asking import weighted_terms
from evident.embeddings.meaning import QueryMeaning, without_meaning
from evident.settings import index_dir

__all__ = ["EmbedStats", "IndexFileError", "LocalIndex", "default_index_path", "rebuild_index",
           "title_first_order"]

# A query word in the title says more about the document than one in its body. 20 (was 4) measured
# best on the development set's tune part (doc2dial-qa recall@3 0.740 -> 0.755, recall@1 0.581 -> 0.602;
# the example questions unchanged at @3, 0.759 -> 0.776 at @1; docs/evaluation.md).
TITLE_WEIGHT = 20.0
CONTENT_WEIGHT = 1.0
# Candidates of a hybrid search: the best this many by BM25 and by meaning, fused (then cut to k).
HYBRID_DEPTH = 32

_COLUMNS = "url, title, source, source_type, content, content_hash, metadata"
# What a search reads of a row: `_COLUMNS`, the id, and the file's stat and name (the document's revision).
_READ = f"{_COLUMNS}, id, origin_mtime_ns, origin_size, origin"
# Files that hold many documents (a JSONL line each): their stat is not one document's revision, and its size
# would tell a caller how much the file's other documents weigh, hidden ones included.
_MANY_DOCUMENT_SUFFIXES = (".jsonl",)


class _Claim(NamedTuple):
    """A new document whose URL another file held when it was read: settled once every file is."""

    doc: SourceDocument
    file: Path
    root: str
    origin: str
    mtime_ns: int
    size: int


def default_index_path(paths: Sequence[str | Path]) -> Path:
    """Where the index of a set of corpus paths lives when none is given: one file per path set."""
    resolved = sorted({str(Path(p).expanduser().resolve()) for p in paths})
    digest = hashlib.sha256("\n".join(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return index_dir() / f"{digest}.sqlite3"


class LocalIndex(MirroredStore):
    """A persistent full-text index of local corpora.

    Safe to share between threads; other objects and processes may read the same file while one
    writes (see `MirroredStore`). `limits` bound what a corpus may make the loader do; `candidate_pool`,
    the candidates a permission-filtered search ranks exactly (`visible_ranking.CANDIDATE_POOL`);
    `title_first_boost`, how far a page's title lifts it to the first place (`ranking.TITLE_FIRST_BOOST`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        limits: CorpusLimits = DEFAULT_LIMITS,
        lock_timeout_s: float = 300.0,
        candidate_pool: int = CANDIDATE_POOL,
        title_first_boost: float = TITLE_FIRST_BOOST,
    ) -> None:
        self.limits = limits
        self.title_first_boost = title_first_boost
        self._vectors: LoadedVectors | None = None
        super().__init__(path, read_only=read_only, lock_timeout_s=lock_timeout_s, title_weight=TITLE_WEIGHT,
                         candidate_pool=candidate_pool)

    # -- reading -------------------------------------------------------------------------------

    def search(
        self, query: str, k: int = 8, *, visible: Sequence[str] | None = None, meaning: QueryMeaning | None = None
    ) -> list[tuple[SourceDocument, float]]:
        """The `k` best documents for free text `query`, best first, each with its positive BM25 score.
        The first is the page whose title the question names best among the TITLE_FIRST_DEPTH best
        (`ranking.title_first`), whatever `k`; so the scores are not always in descending order: the
        order is the ranking, the score is BM25's.

        `visible`: the caller's visibility tokens (`visibility.principal_tokens`); only documents holding
        one are searched, and the ranking's statistics count only them. None searches every document.

        `meaning`: the query's vector. When the index has vectors of its model (`embed`), the ranking is
        hybrid (`evident.embeddings.meaning.fuse` of BM25 and the best window's cosine) and each document
        with vectors carries its windows' cosines in metadata (`SEMANTIC_WINDOWS`); a document the words
        did not find scores 0 by BM25. While the embedding is unfinished (`unembedded`), a document without
        vectors yet is ranked by its words alone and carries no cosine. Without vectors of the model the
        ranking is BM25's alone.
        """
        terms, weights = weighted_terms(query)
        if k <= 0 or (visible is not None and not visible) or (not terms and meaning is None):
            return []
        with self._reading():
            loaded = self._loaded_vectors(meaning.model_id) if meaning is not None else None
            if loaded is None or meaning is None:
                if not terms:
                    return []
                return self._by_words(query, terms, weights, max(k, TITLE_FIRST_DEPTH), visible)[:k]
            return self._hybrid(query, terms, weights, k, visible, loaded, meaning)

    def _lexical(
        self, query: str, terms: list[str], weights: dict[str, float], depth: int, visible: Sequence[str] | None
    ) -> list[tuple[Sequence[Any], float]]:
        """BM25's best `depth` rows (`_READ`), best first, with their scores."""
        if not terms:
            return []
        hits = self._mirror_hits(terms, depth, weights, visible)
        if hits is None:
            rows = fts_search(self._conn, query, depth, columns=_READ,
                              title_weight=TITLE_WEIGHT, content_weight=CONTENT_WEIGHT, visible=visible)  # fmt: skip
            width = len(_READ.split(","))  # the score follows the row's columns
            return [(row[:width], float(row[width])) for row in rows]
        marks = ", ".join("?" for _ in hits)
        sql = f"SELECT {_READ} FROM documents WHERE url IN ({marks})"
        found = {row[0]: row for row in self._conn.execute(sql, [url for url, _ in hits])} if hits else {}
        # A url missing here was deleted by another process between the two reads.
        return [(found[url], score) for url, score in hits if url in found]

    def _by_words(
        self, query: str, terms: list[str], weights: dict[str, float], depth: int, visible: Sequence[str] | None
    ) -> list[tuple[SourceDocument, float]]:
        hits = [(_document(row), score) for row, score in self._lexical(query, terms, weights, depth, visible)]
        return title_first_order(terms, hits, self.title_first_boost)

    def _hybrid(
        self, query: str, terms: list[str], weights: dict[str, float], k: int, visible: Sequence[str] | None,
        loaded: LoadedVectors, meaning: QueryMeaning,
    ) -> list[tuple[SourceDocument, float]]:
        depth = max(k, TITLE_FIRST_DEPTH, HYBRID_DEPTH)
        lexical = self._lexical(query, terms, weights, depth, visible)
        cosines = loaded.cosines(meaning.vector)
        allowed = self._visible_ids(visible) if visible is not None else None
        by_meaning = ranked_by_meaning(loaded, cosines, allowed, depth)
        rows: dict[int, Sequence[Any]] = {int(row[7]): row for row, _ in lexical}
        bm25 = {int(row[7]): score for row, score in lexical}
        wanted = [i for i, _ in by_meaning if i not in rows]
        if wanted:
            marks = ", ".join("?" for _ in wanted)
            for row in self._conn.execute(f"SELECT {_READ} FROM documents WHERE id IN ({marks})", wanted):
                rows[int(row[7])] = row
        candidates = [Candidate(_document(rows[i]), bm25.get(i, 0.0),
                                loaded.windows_of(i, cosines) if loaded.has(i) else None) for i in rows]  # fmt: skip
        return hybrid_ranking(candidates, terms, meaning.weight, k, self.title_first_boost)

    def _visible_ids(self, visible: Sequence[str]) -> list[int]:
        """The ids of the documents holding a `visible` token."""
        tokens = sorted(set(visible))
        marks = ", ".join("?" for _ in tokens)
        return [int(row[0]) for row in self._conn.execute(
            f"SELECT DISTINCT document_id FROM document_visibility WHERE token IN ({marks})", tokens)]

    def _loaded_vectors(self, model_id: str) -> LoadedVectors | None:
        """The index's vectors of `model_id` in memory (those of every document embedded so far), or None
        when it has none of that model."""
        key = (self._generation(), vectors_generation(self._conn), vectors_key(model_id))
        if self._vectors is None or self._vectors.key != key:
            if stored_model(self._conn) != key[2]:
                return None
            # One read transaction: the generations and the rows are of the same moment, while an embedding
            # run in another connection commits its steps.
            with _snapshot(self._conn):
                key = (self._generation(), vectors_generation(self._conn), vectors_key(model_id))
                self._vectors = load_vectors(self._conn, key)
        return self._vectors if len(self._vectors.documents) else None

    def ready(self, model_id: str) -> bool:
        """Whether every document has vectors of `model_id`."""
        with self._reading():
            return unembedded(self._conn, model_id) == 0

    def embedding_started(self, model_id: str) -> bool:
        """Whether an embedding run with `model_id` ever started on this index (its vectors are that model's)."""
        with self._reading():
            return stored_model(self._conn) == vectors_key(model_id)

    def unembedded(self, model_id: str) -> int:
        """How many documents have no vectors of `model_id` yet (`embed` gives them theirs)."""
        with self._reading():
            return unembedded(self._conn, model_id)

    def embed(self, scorer: SemanticScorer, *, progress: EmbedProgress | None = None,
              step_windows: int = STEP_WINDOWS, stop: Callable[[], bool] | None = None,
              beside_another: bool = True) -> EmbedStats:
        """Embed the windows of every document that has no vectors of `scorer`'s model (all of them
        when the model changed), in transactions of about `step_windows` windows, each under the write
        lock (`vectors.embed_missing`); `stop()` true before a step ends the run there. An interruption
        or an embeddings failure (raised) keeps what was committed.

        A run holds `<index>.embedding.lock` while it lasts. When another process holds it (an `evident
        index`, another replica's background embedding), a run with `beside_another` false returns at once
        (`EmbedStats.elsewhere`) rather than embed the same documents twice over; `evident index`, asked by
        its user, embeds anyway (each step stores what is still missing, so nothing is stored twice).

        This object's searches wait for the whole run (one connection): a search that must not, opens
        its own `LocalIndex` on the file, as `LocalCorpusRetriever.embed_index` does."""
        self._require_writable()

        @contextmanager
        def step() -> Iterator[None]:
            with self._write_lock.hold(), _transaction(self._conn):
                yield

        running = FileLock(f"{self.path}.embedding.lock")
        try:
            running.acquire(timeout=0)
        except Timeout:
            if not beside_another:
                return EmbedStats(model_id=scorer.model_id, elsewhere=True)
        try:
            with self._lock, self._guard():
                return embed_missing(self._conn, scorer, step, progress, step_windows, stop)
        finally:
            if running.is_locked:
                running.release()

    def get(self, url: str, *, visible: Sequence[str] | None = None) -> SourceDocument | None:
        """The document whose id is `url` as the index holds it now; with `visible` (the caller's visibility
        tokens), only if it holds one of them. None when there is no such document (or it is hidden)."""
        with self._reading():
            row = self._conn.execute(f"SELECT {_READ} FROM documents WHERE url = ?", (url,)).fetchone()
            if row is None or visible is None:
                return _document(row) if row else None
            tokens = sorted(set(visible))
            marks = ", ".join("?" for _ in tokens)
            seen = self._conn.execute(f"SELECT 1 FROM document_visibility WHERE document_id = ? AND token IN ({marks})",
                                      [row[7], *tokens]).fetchone() if tokens else None  # fmt: skip
        return _document(row) if seen else None

    def count(self) -> int:
        with self._reading():
            return int(self._conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def roots(self) -> list[str]:
        """The corpus paths (resolved) this index holds documents from."""
        with self._reading():
            return [row[0] for row in self._conn.execute("SELECT DISTINCT root FROM documents ORDER BY root")]

    # -- writing -------------------------------------------------------------------------------

    def refresh(
        self,
        paths: Sequence[str | Path],
        *,
        progress: Callable[[Path, int, int], None] | None = None,
        on_skip: SkipHandler | None = None,
    ) -> IndexStats:
        """Make the index hold exactly the documents of `paths`, touching only what changed.

        One transaction: documents of corpus paths no longer listed go first (so a renamed folder's
        documents keep their URLs), then every path is brought up to date. A path that does not
        exist, a broken JSONL line, a URL claimed by two files (across all `paths`, and against
        files left unchanged), or a result with no documents at all raises `CorpusError` and leaves
        the index as it was: an index is never emptied by a refresh.
        """
        self._require_writable()
        roots = [Path(p) for p in paths]
        if not roots:
            raise CorpusError(".", "no corpus paths given")
        for root in roots:
            if not root.exists():
                raise CorpusError(root, "no such file or directory (the index was left as it was)")
        stats = IndexStats()
        keep = sorted({str(root.resolve()) for root in roots})
        claims: list[_Claim] = []
        with self._writing():
            stats.removed += self._delete(f"WHERE root NOT IN ({', '.join('?' for _ in keep)})", keep)
            self._conn.execute(f"DELETE FROM skipped_files WHERE root NOT IN ({', '.join('?' for _ in keep)})", keep)
            for root in roots:
                tick = (lambda done, total, root=root: progress(root, done, total)) if progress else None
                found = self._add_root(root, tick, on_skip, claims)
                for field in IndexStats.model_fields:
                    setattr(stats, field, getattr(stats, field) + getattr(found, field))
            self._settle(claims, stats, on_skip if on_skip is not None else log_skip)
            if not self._conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone():
                raise CorpusError(", ".join(map(str, roots)), "no documents found (the index was left as it was)")
        return stats

    def add_corpus(
        self,
        path: str | Path,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_skip: SkipHandler | None = None,
    ) -> IndexStats:
        """Bring the documents of one corpus path up to date, touching only what changed.

        Runs in one transaction: concurrent readers see the old index or the new one, never a mix,
        and an error (a broken JSONL line, a URL claimed by two files: `CorpusError`) leaves the
        index as it was.
        """
        self._require_writable()
        claims: list[_Claim] = []
        with self._writing():
            stats = self._add_root(Path(path), progress, on_skip, claims)
            self._settle(claims, stats, on_skip if on_skip is not None else log_skip)
            return stats

    def _add_root(
        self,
        root_path: Path,
        progress: Callable[[int, int], None] | None,
        on_skip: SkipHandler | None,
        claims: list[_Claim],
    ) -> IndexStats:
        """`add_corpus` inside the caller's write transaction; new documents whose URL another file
        holds are appended to `claims` for `_settle`."""
        stats = IndexStats()
        resolved = root_path.resolve()
        root = str(resolved)

        def counted() -> None:
            stats.skipped += 1

        skips = SkipRecords(self._conn, root, self.limits, on_skip if on_skip is not None else log_skip,
                            lambda file: _origin(root_path, resolved, file), counted)
        report = skips.report
        files = corpus_files(root_path, on_skip=report, limits=self.limits)
        current = {_origin(root_path, resolved, file): file for file in files}
        known = {
            origin: (mtime_ns, size, count)
            for origin, mtime_ns, size, count in self._conn.execute(
                "SELECT origin, origin_mtime_ns, origin_size, COUNT(*) FROM documents"
                " WHERE root = ? GROUP BY origin",
                (root,),
            )
        }
        copies = self._copies(root_path, current, known, skips)
        # Deletions first, so a document that moved to another file keeps its URL free for it.
        for origin in sorted(set(known) - set(current)):
            stats.removed += self._delete("WHERE root = ? AND origin = ?", (root, origin))
        for done, (origin, file) in enumerate(current.items(), start=1):
            if origin in copies:
                stats.removed += self._delete("WHERE root = ? AND origin = ?", (root, origin))
                report(file, copy_of(copies[origin]))
            elif origin in known or not skips.skipped_before(origin, file_stat(file)):
                self._refresh_origin(root_path, root, origin, file, known.get(origin), stats, report, claims)
            if progress is not None:
                progress(done, len(current))
        skips.save()
        return stats

    def _copies(self, root_path: Path, current: dict[str, Path], known: dict[str, tuple[int, int, int]],
                skips: SkipRecords) -> dict[str, str]:
        """The files that are a page of the corpus in a less preferred format, by origin, each with the
        relative path of the page kept (`excluded.page_copies`). Only pages one of whose files changed since
        the last refresh are read; for the others the last refresh's decision stands."""
        origins = {file: origin for origin, file in current.items()}

        def settled(file: Path) -> bool:
            origin = origins[file]
            return known[origin][:2] == file_stat(file) if origin in known else skips.settled(origin, file_stat(file))

        copies = page_copies(((relative_path(file, root_path), file) for file in current.values()),
                             lambda file: file_text(file, root_path, self.limits), settled)
        return {origins[file]: kept for file, kept in copies.items()}

    def _refresh_origin(
        self,
        root_path: Path,
        root: str,
        origin: str,
        file: Path,
        known: tuple[int, int, int] | None,
        stats: IndexStats,
        report: SkipHandler,
        claims: list[_Claim],
    ) -> None:
        try:
            stat = file.stat()
        except OSError as exc:
            report(file, f"cannot read ({exc.strerror or exc.__class__.__name__})")
            return
        if known is not None and (known[0], known[1]) == (stat.st_mtime_ns, stat.st_size):
            stats.unchanged += known[2]
            return
        old = {
            row[0]: row[1:]
            for row in self._conn.execute(
                "SELECT url, title, source, source_type, content_hash, metadata FROM documents"
                " WHERE root = ? AND origin = ?",
                (root, origin),
            )
        }
        seen: set[str] = set()
        for doc in load_file(file, root=root_path, on_skip=report, limits=self.limits):
            metadata = _dump_metadata(doc.metadata)
            if doc.url not in old:
                claim = _Claim(doc, file, root, origin, stat.st_mtime_ns, stat.st_size)
                if self._conn.execute("SELECT 1 FROM documents WHERE url = ?", (doc.url,)).fetchone():
                    # Not an error yet: the holder may be a file read later in this refresh that no
                    # longer has it (a document moved between files); `_settle` decides.
                    claims.append(claim)
                else:
                    self._insert(claim)
                    stats.added += 1
            elif old[doc.url] == (doc.title, doc.source, doc.source_type, doc.content_hash, metadata):
                stats.unchanged += 1
            else:
                (document_id,) = self._conn.execute(
                    "UPDATE documents SET title = ?, source = ?, source_type = ?, content = ?,"
                    " content_hash = ?, metadata = ?, text_tokens = ? WHERE url = ? RETURNING id",
                    (doc.title, doc.source, doc.source_type, doc.content, doc.content_hash, metadata,
                     self._mirror.text_tokens(doc.title, doc.content), doc.url),
                ).fetchone()  # fmt: skip
                store_visibility(self._conn, int(document_id), doc.metadata.get("acl"))
                self._mirror_op(self._mirror.replace, doc.url, doc.title, doc.content,
                                document_tokens(doc.metadata.get("acl")))  # fmt: skip
                stats.updated += 1
            seen.add(doc.url)
        for url in set(old) - seen:
            stats.removed += self._delete("WHERE url = ?", (url,))
        self._conn.execute(
            "UPDATE documents SET origin_mtime_ns = ?, origin_size = ? WHERE root = ? AND origin = ?",
            (stat.st_mtime_ns, stat.st_size, root, origin),
        )

    def _insert(self, claim: _Claim) -> None:
        doc = claim.doc
        inserted = self._conn.execute(
            f"INSERT INTO documents ({_COLUMNS}, root, origin, origin_mtime_ns, origin_size, text_tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc.url, doc.title, doc.source, doc.source_type, doc.content, doc.content_hash,
             _dump_metadata(doc.metadata), claim.root, claim.origin, claim.mtime_ns, claim.size,
             self._mirror.text_tokens(doc.title, doc.content)),
        )  # fmt: skip
        store_visibility(self._conn, int(inserted.lastrowid or 0), doc.metadata.get("acl"))
        self._mirror_op(self._mirror.add, doc.url, doc.title, doc.content, document_tokens(doc.metadata.get("acl")))

    def _settle(self, claims: list[_Claim], stats: IndexStats, report: SkipHandler) -> None:
        """Insert each claimed document whose URL is free now that every file was read.

        A URL still held by another file raises `CorpusError` naming both (the caller's transaction
        rolls back: neither file may win, or one could be cited under the other's URL); held by the
        same file reached through a second corpus path or a link, the repeat is only reported.
        """
        for claim in claims:
            held = self._conn.execute("SELECT origin, metadata FROM documents WHERE url = ?",
                                      (claim.doc.url,)).fetchone()  # fmt: skip
            if held is None:
                self._insert(claim)
                stats.added += 1
                continue
            if Path(held[0]).resolve() == claim.file.resolve():
                stats.skipped += 1
                report(claim.file, f"the same file as {held[0]} (url {claim.doc.url})")
                continue
            holder = SourceDocument(url=claim.doc.url, content=".", metadata=json.loads(held[1]))
            raise url_conflict(claim.file, claim.doc, held[0], holder)

    def retain_roots(self, paths: Sequence[str | Path]) -> int:
        """Remove documents of every corpus path not in `paths`; returns how many were removed."""
        self._require_writable()
        keep = sorted({str(Path(p).resolve()) for p in paths})
        placeholders = ", ".join("?" for _ in keep)
        with self._writing():
            return self._delete(f"WHERE root NOT IN ({placeholders})" if keep else "", keep)

def _origin(root: Path, resolved_root: Path, file: Path) -> str:
    """The identity of a file across runs: its absolute path (links inside the root not resolved)."""
    if file == root:
        return str(resolved_root)
    return str(resolved_root / file.relative_to(root))


def _dump_metadata(metadata: dict[str, Any]) -> str:
    # Sorted keys make the stored text canonical, so an unchanged document compares equal.
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str)


def title_first_order(
    terms: Sequence[str], hits: list[tuple[SourceDocument, float]], boost: float = TITLE_FIRST_BOOST
) -> list[tuple[SourceDocument, float]]:
    """`hits` with the page whose title the question names best among the first TITLE_FIRST_DEPTH
    first (`ranking.title_first` with `boost`)."""
    first = title_first(terms, [(doc.title, score) for doc, score in hits[:TITLE_FIRST_DEPTH]], boost)
    return [hits[first], *hits[:first], *hits[first + 1 :]] if first else hits


def _document(row: Sequence[Any]) -> SourceDocument:
    """A `_READ` row as a document; its revision is the one a JSONL line states, else the stat of the file it
    alone fills (a JSONL line without one has none: its content hash pins its text)."""
    metadata = without_meaning(json.loads(row[6]))
    one_document_file = len(row) >= 11 and not str(row[10]).lower().endswith(_MANY_DOCUMENT_SUFFIXES)
    if one_document_file and not isinstance(metadata.get(REVISION), str):
        metadata[REVISION] = f"mtime_ns={row[8]};size={row[9]}"
    return SourceDocument(
        url=row[0],
        title=row[1],
        source=row[2],
        source_type=row[3],
        content=row[4],
        content_hash=row[5],
        # A corpus file's metadata may not pose as the retrieval's scores by meaning (set in `_hybrid`).
        metadata=metadata,
    )


def rebuild_index(
    path: str | Path,
    paths: Sequence[str | Path],
    *,
    limits: CorpusLimits = DEFAULT_LIMITS,
    progress: Callable[[Path, int, int], None] | None = None,
    on_skip: SkipHandler | None = None,
    lock_timeout_s: float = 300.0,
) -> tuple[IndexStats, int]:
    """Build the index of `paths` from scratch beside `path`, then put it in place of `path`.

    The way out of a damaged index file: nothing of the old file is read. Until the new index is
    complete the old one stays where it was, so a failed rebuild (a missing path, no documents)
    loses nothing. Returns the stats and the document count.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = target.with_name(f"{target.name}.rebuild")
    with WriteLock(target, lock_timeout_s).hold():
        _remove_index_files(fresh)
        try:
            with LocalIndex(fresh, limits=limits) as index:
                stats = index.refresh(paths, progress=progress, on_skip=on_skip)
                count = index.count()
        except BaseException:
            _remove_index_files(fresh)
            raise
        for suffix in ("-wal", "-shm", "-journal"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(fresh, target)
        shutil.rmtree(f"{target}.tantivy", ignore_errors=True)
        if Path(f"{fresh}.tantivy").is_dir():
            os.replace(f"{fresh}.tantivy", f"{target}.tantivy")
        Path(f"{fresh}.lock").unlink(missing_ok=True)
    return stats, count


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction on an autocommit connection: every statement in it sees the same commit."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def _remove_index_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", ".lock", ".embedding.lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(f"{path}.tantivy", ignore_errors=True)
