"""The embedded default retrieval: SQLite documents ranked by BM25 through a Tantivy index.

SQLite ships with Python and needs no server; it stores the documents and tracks what changed, so
indexing is incremental per file (mtime + size, then content) and refreshing a large unchanged
corpus costs one `stat` per file. Every change is mirrored into a Tantivy index beside the file
(`<index>.tantivy/`), whose top-k BM25 (block-max WAND) stays fast where FTS5, which scores every
match, does not. BM25 is what a lexical verifier downstream wants anyway: documents that share the
question's words. The FTS5 table is kept as the fallback while the Tantivy directory is stale.

Writers take `<index>.lock` (a second `evident index` waits for the first); a refresh of a set of
corpus paths is one transaction, so a failure (a vanished path, a broken JSONL line, no documents
at all) leaves the previous index as it was; a damaged Tantivy directory is rebuilt from SQLite.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from evident.alignment.models import SourceDocument
from evident.connectors.index.fts_query import fts_search, weighted_terms
from evident.connectors.index.store import IndexFileError, WriteLock, _transaction, connect, database_error
from evident.connectors.index.loaders import (
    DEFAULT_LIMITS,
    CorpusError,
    CorpusLimits,
    SkipHandler,
    corpus_files,
    load_file,
    log_skip,
)
from evident.connectors.index.ranking import MirrorError, TantivyMirror, tantivy_errors

__all__ = ["IndexFileError", "IndexStats", "LocalIndex", "default_index_path", "rebuild_index"]

log = logging.getLogger(__name__)

# A query word in the title says more about the document than one in its body. 20 (was 4) measured
# best on the development set's tune part (doc2dial-qa recall@3 0.740 -> 0.755, recall@1 0.581 -> 0.602;
# the example questions unchanged at @3, 0.759 -> 0.776 at @1; docs/evaluation.md).
TITLE_WEIGHT = 20.0
CONTENT_WEIGHT = 1.0

_COLUMNS = "url, title, source, source_type, content, content_hash, metadata"


class IndexStats(BaseModel):
    """Document counts of one `add_corpus` run (`skipped` counts skip reports, not documents)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0


def default_index_path(paths: Sequence[str | Path]) -> Path:
    """Where the index of a set of corpus paths lives when none is given: one file per path set."""
    resolved = sorted({str(Path(p).expanduser().resolve()) for p in paths})
    digest = hashlib.sha256("\n".join(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    base = os.environ.get("EVIDENT_INDEX_DIR") or "~/.cache/evident/indexes"
    return Path(base).expanduser() / f"{digest}.sqlite3"


class LocalIndex:
    """A persistent full-text index of local corpora.

    One connection guarded by a lock serves all threads of this object; other objects (threads or
    processes) may open the same file at the same time, since WAL mode lets readers proceed while
    one writer refreshes the index. Writers (objects or processes) take turns through `<index>.lock`,
    waiting up to `lock_timeout_s`. `limits` bound what a corpus may make the loader do.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        limits: CorpusLimits = DEFAULT_LIMITS,
        lock_timeout_s: float = 300.0,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.limits = limits
        self._lock = threading.RLock()
        self._conn = connect(self.path, read_only=read_only)
        self._write_lock = WriteLock(self.path, lock_timeout_s)
        self._mirror = TantivyMirror(Path(f"{self.path}.tantivy"), title_weight=TITLE_WEIGHT)
        self._mirror_generation: int | None = None  # the SQLite generation the mirror reflects
        self._changed = False  # whether the current write transaction changed any document
        with self._lock, self._guard():
            self._sync_mirror()

    # -- reading -------------------------------------------------------------------------------

    def search(self, query: str, k: int = 8) -> list[tuple[SourceDocument, float]]:
        """The `k` best documents for free text `query`, best first, with positive BM25 scores."""
        terms, weights = weighted_terms(query)
        if not terms or k <= 0:
            return []
        with self._reading():
            hits = self._mirror_hits(terms, k, weights)
            if hits is None:
                rows = fts_search(self._conn, query, k, columns=_COLUMNS,
                                  title_weight=TITLE_WEIGHT, content_weight=CONTENT_WEIGHT)  # fmt: skip
                return [(_document(row), float(row[7])) for row in rows]
            marks = ", ".join("?" for _ in hits)
            sql = f"SELECT {_COLUMNS} FROM documents WHERE url IN ({marks})"
            found = {row[0]: row for row in self._conn.execute(sql, [url for url, _ in hits])} if hits else {}
        # A url missing here was deleted by another process between the two reads.
        return [(_document(found[url]), score) for url, score in hits if url in found]

    def _mirror_hits(self, terms: list[str], k: int, weights: dict[str, float]) -> list[tuple[str, float]] | None:
        """Tantivy's top k (url, score), or None when the mirror cannot be trusted right now."""
        generation = self._generation()
        if generation != self._mirror_generation:
            # Another process wrote: trust its mirror commit only once its marker says it is done.
            marker = self._mirror.marker()
            if marker is None or marker[0] != generation:
                return None
            try:
                self._mirror.refresh()
            except (MirrorError, OSError, ValueError) as exc:
                log.warning("%s: Tantivy index unusable, searching with FTS5 (%s)", self.path, exc)
                return None
            self._mirror_generation = generation
        for attempt in (1, 2):
            try:
                with tantivy_errors(self._mirror.directory):
                    return self._mirror.top(terms, k, weights)
            except MirrorError as exc:
                if self.read_only or attempt == 2:
                    log.warning("%s: Tantivy search failed, searching with FTS5 (%s)", self.path, exc)
                    return None
                log.warning("%s: Tantivy index damaged, rebuilding it from SQLite (%s)", self.path, exc)
                self._sync_mirror(force=True)
                if self._mirror_generation is None:
                    return None
        return None

    def get(self, url: str) -> SourceDocument | None:
        with self._reading():
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM documents WHERE url = ?", (url,)).fetchone()
        return _document(row) if row else None

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
        exist, a broken JSONL line, or a result with no documents at all raises `CorpusError` and
        leaves the index as it was: an index is never emptied by a refresh.
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
        with self._writing():
            stats.removed += self._delete(f"WHERE root NOT IN ({', '.join('?' for _ in keep)})", keep)
            for root in roots:
                tick = (lambda done, total, root=root: progress(root, done, total)) if progress else None
                found = self._add_root(root, tick, on_skip)
                for field in IndexStats.model_fields:
                    setattr(stats, field, getattr(stats, field) + getattr(found, field))
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
        and an error (a broken JSONL line raises `CorpusError`) leaves the index as it was.
        """
        self._require_writable()
        with self._writing():
            return self._add_root(Path(path), progress, on_skip)

    def _add_root(
        self, root_path: Path, progress: Callable[[int, int], None] | None, on_skip: SkipHandler | None
    ) -> IndexStats:
        """`add_corpus` inside the caller's write transaction."""
        stats = IndexStats()
        user_skip = on_skip if on_skip is not None else log_skip

        def report(file: Path, reason: str) -> None:
            stats.skipped += 1
            user_skip(file, reason)

        files = corpus_files(root_path, on_skip=report, limits=self.limits)
        resolved = root_path.resolve()
        root = str(resolved)
        current = {_origin(root_path, resolved, file): file for file in files}
        known = {
            origin: (mtime_ns, size, count)
            for origin, mtime_ns, size, count in self._conn.execute(
                "SELECT origin, origin_mtime_ns, origin_size, COUNT(*) FROM documents"
                " WHERE root = ? GROUP BY origin",
                (root,),
            )
        }
        # Deletions first, so a document that moved to another file keeps its URL free for it.
        for origin in sorted(set(known) - set(current)):
            stats.removed += self._delete("WHERE root = ? AND origin = ?", (root, origin))
        for done, (origin, file) in enumerate(current.items(), start=1):
            self._refresh_origin(root_path, root, origin, file, known.get(origin), stats, report)
            if progress is not None:
                progress(done, len(current))
        return stats

    def _refresh_origin(
        self,
        root_path: Path,
        root: str,
        origin: str,
        file: Path,
        known: tuple[int, int, int] | None,
        stats: IndexStats,
        report: SkipHandler,
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
                owner = self._conn.execute("SELECT origin FROM documents WHERE url = ?", (doc.url,)).fetchone()
                if owner is not None:
                    # First indexed wins, as in load_corpus; the file is re-read on the next run
                    # and gets its document once the other one is gone.
                    report(file, f"duplicate url {doc.url} (already indexed from {owner[0]})")
                    continue
                self._conn.execute(
                    f"INSERT INTO documents ({_COLUMNS}, root, origin, origin_mtime_ns, origin_size)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc.url, doc.title, doc.source, doc.source_type, doc.content, doc.content_hash,
                     metadata, root, origin, stat.st_mtime_ns, stat.st_size),
                )  # fmt: skip
                self._mirror_op(self._mirror.add, doc.url, doc.title, doc.content)
                stats.added += 1
            elif old[doc.url] == (doc.title, doc.source, doc.source_type, doc.content_hash, metadata):
                stats.unchanged += 1
            else:
                self._conn.execute(
                    "UPDATE documents SET title = ?, source = ?, source_type = ?, content = ?,"
                    " content_hash = ?, metadata = ? WHERE url = ?",
                    (doc.title, doc.source, doc.source_type, doc.content, doc.content_hash, metadata, doc.url),
                )
                self._mirror_op(self._mirror.replace, doc.url, doc.title, doc.content)
                stats.updated += 1
            seen.add(doc.url)
        for url in set(old) - seen:
            stats.removed += self._delete("WHERE url = ?", (url,))
        self._conn.execute(
            "UPDATE documents SET origin_mtime_ns = ?, origin_size = ? WHERE root = ? AND origin = ?",
            (stat.st_mtime_ns, stat.st_size, root, origin),
        )

    def retain_roots(self, paths: Sequence[str | Path]) -> int:
        """Remove documents of every corpus path not in `paths`; returns how many were removed."""
        self._require_writable()
        keep = sorted({str(Path(p).resolve()) for p in paths})
        placeholders = ", ".join("?" for _ in keep)
        with self._writing():
            return self._delete(f"WHERE root NOT IN ({placeholders})" if keep else "", keep)

    def _delete(self, where: str, parameters: Sequence[Any]) -> int:
        """Delete the matching documents from SQLite and the mirror; returns how many."""
        urls = [row[0] for row in self._conn.execute(f"DELETE FROM documents {where} RETURNING url", parameters)]
        if urls:
            self._mirror_op(self._mirror.delete, urls)
        return len(urls)

    # -- the Tantivy mirror --------------------------------------------------------------------

    def _generation(self) -> int:
        # Bumped by every write transaction that changes documents; the mirror records which one
        # it reflects. Index files written before the mirror existed have none: generation 0.
        row = self._conn.execute("SELECT value FROM evident_meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def _sync_mirror(self, *, force: bool = False) -> None:
        """Trust the mirror if it reflects SQLite undamaged, else rebuild it (writable) or leave it to FTS5.

        `force`: rebuild even if it looks in sync (a search found it damaged).
        """
        if not force and self._mirror_in_sync():
            return
        self._mirror_generation = None
        if not force and self._mirror.marker() == self._state():
            # Up to date by its marker, yet its files fail their checksums or document count.
            log.warning("%s: Tantivy index damaged, rebuilding it from SQLite", self.path)
        if self.read_only:
            log.warning("%s: Tantivy index missing, stale or damaged; searching with FTS5 until opened "
                        "writable", self.path)  # fmt: skip
            return
        try:
            with self._write_lock.hold():
                # Another writer may have rebuilt it while this one waited for the lock.
                if not force and self._mirror_in_sync():
                    return
                # Under SQLite's write lock too, so the rows read are exactly the generation recorded.
                with _transaction(self._conn):
                    generation, documents = self._state()
                    rows = self._conn.execute("SELECT url, title, content FROM documents")
                    self._mirror.rebuild(rows, generation, documents)
            self._mirror_generation = generation
        except (MirrorError, OSError, ValueError) as exc:
            log.warning("%s: cannot rebuild the Tantivy index, searching with FTS5 (%s)", self.path, exc)

    def _state(self) -> tuple[int, int]:
        """(generation, documents) of SQLite now."""
        return self._generation(), int(self._conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def _mirror_in_sync(self) -> bool:
        generation, documents = self._state()
        if self._mirror.in_sync(generation, documents):
            self._mirror_generation = generation
            return True
        return False

    def _mirror_op(self, operation: Callable[..., None], *arguments: Any) -> None:
        self._changed = True
        if self._mirror_generation is None:
            return  # stale mirror: rebuilt once the SQLite write has committed
        try:
            operation(*arguments)
        except (MirrorError, OSError, ValueError) as exc:
            log.warning("%s: Tantivy update failed, will rebuild (%s)", self.path, exc)
            self._mirror.rollback()
            self._mirror_generation = None

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One SQLite write transaction, mirrored into Tantivy once SQLite has committed it."""
        with self._lock, self._guard(), self._write_lock.hold():
            self._changed = False
            try:
                with _transaction(self._conn):
                    yield
                    if self._changed:
                        generation = self._generation() + 1
                        self._conn.execute(
                            "INSERT OR REPLACE INTO evident_meta VALUES ('generation', ?)", (str(generation),)
                        )
                        documents = int(self._conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
            except BaseException:
                self._mirror.rollback()
                raise
            if not self._changed:
                return
            if self._mirror_generation is not None:
                try:
                    self._mirror.commit(generation, documents)
                    self._mirror_generation = generation
                    return
                except (MirrorError, OSError, ValueError) as exc:
                    log.warning("%s: Tantivy commit failed, rebuilding (%s)", self.path, exc)
            self._sync_mirror()

    def _require_writable(self) -> None:
        if self.read_only:
            raise IndexFileError(self.path, "opened read-only")

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._mirror.close()
            self._conn.close()

    def __enter__(self) -> LocalIndex:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock, self._guard():
            yield

    @contextmanager
    def _guard(self) -> Iterator[None]:
        # Corruption can surface on any query, not only at open; callers get the same one-line error.
        try:
            yield
        except sqlite3.ProgrammingError as exc:
            raise IndexFileError(self.path, f"index is closed ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise database_error(self.path, exc) from None


def _origin(root: Path, resolved_root: Path, file: Path) -> str:
    """The identity of a file across runs: its absolute path (links inside the root not resolved)."""
    if file == root:
        return str(resolved_root)
    return str(resolved_root / file.relative_to(root))


def _dump_metadata(metadata: dict[str, Any]) -> str:
    # Sorted keys make the stored text canonical, so an unchanged document compares equal.
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str)


def _document(row: Sequence[Any]) -> SourceDocument:
    return SourceDocument(
        url=row[0],
        title=row[1],
        source=row[2],
        source_type=row[3],
        content=row[4],
        content_hash=row[5],
        metadata=json.loads(row[6]),
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


def _remove_index_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(f"{path}.tantivy", ignore_errors=True)
