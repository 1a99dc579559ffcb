"""The embedded default retrieval: a persistent SQLite FTS5 index with BM25 ranking.

SQLite ships with Python, needs no server and gives BM25 for free, which is what a lexical
verifier downstream wants anyway: documents that share the question's words. Indexing is
incremental per file (mtime + size, then content), so refreshing a large unchanged corpus costs
one `stat` per file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from evident.alignment.models import SourceDocument
from evident.connectors.fts_query import fts_match_expression
from evident.connectors.index_schema import MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION
from evident.connectors.loaders import SkipHandler, corpus_files, load_file, log_skip

TITLE_WEIGHT = 4.0  # a query word in the title says more about the document than one in its body
CONTENT_WEIGHT = 1.0

_COLUMNS = "url, title, source, source_type, content, content_hash, metadata"
_TIE_MARGIN = 64  # extra ranked rows read so that ties at the k-th place are usually resolved in one go
_SEARCH_BY_URL = f"""
    SELECT d.url, d.title, d.source, d.source_type, d.content, d.content_hash, d.metadata,
           -bm25(documents_fts, {TITLE_WEIGHT}, {CONTENT_WEIGHT}) AS score
    FROM documents_fts JOIN documents AS d ON d.id = documents_fts.rowid
    WHERE documents_fts MATCH ?
    ORDER BY score DESC, d.url
    LIMIT ?
"""


class IndexFileError(Exception):
    """The index file cannot be used (not SQLite, not ours, corrupt, newer schema)."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = Path(path)
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


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
    one writer refreshes the index.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn = self._connect()

    # -- opening -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise IndexFileError(self.path, "is a folder, not an index file")
        if self.read_only and not self.path.exists():
            raise IndexFileError(self.path, "no such index")
        if not self.read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = f"{self.path.resolve().as_uri()}?mode=ro" if self.read_only else str(self.path)
        try:
            # Autocommit mode: transactions are opened explicitly, so their extent is visible here.
            conn = sqlite3.connect(target, uri=self.read_only, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise IndexFileError(self.path, f"cannot open ({exc})") from None
        try:
            self._prepare(conn)
        except IndexFileError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise IndexFileError(self.path, f"not a usable EvidenT index ({exc})") from None
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA busy_timeout = 5000")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not self.read_only:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        if "evident_meta" not in tables:
            if tables:
                raise IndexFileError(self.path, "is an SQLite database but not an EvidenT index")
            if self.read_only:
                raise IndexFileError(self.path, "is empty (build it with add_corpus first)")
            self._create(conn)
            return
        row = conn.execute("SELECT value FROM evident_meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row and str(row[0]).isdigit() else 0
        if version > SCHEMA_VERSION:
            raise IndexFileError(self.path, f"written by a newer EvidenT (schema {version} > {SCHEMA_VERSION})")
        if version < SCHEMA_VERSION:
            if self.read_only:
                raise IndexFileError(self.path, f"needs migration from schema {version}; open it writable once")
            self._migrate(conn, version)

    def _create(self, conn: sqlite3.Connection) -> None:
        try:
            with _transaction(conn):
                # Another process may have created the schema while we waited for the write lock.
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'evident_meta'").fetchone():
                    return
                for statement in SCHEMA_V1:
                    conn.execute(statement)
                conn.execute("INSERT INTO evident_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc).lower():
                raise IndexFileError(self.path, "this SQLite build has no FTS5 support") from None
            raise

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            if target not in MIGRATIONS:
                raise IndexFileError(self.path, f"cannot migrate from schema {version}; rebuild the index")
            with _transaction(conn):
                for statement in MIGRATIONS[target]:
                    conn.execute(statement)
                conn.execute("UPDATE evident_meta SET value = ? WHERE key = 'schema_version'", (str(target),))

    # -- reading -------------------------------------------------------------------------------

    def search(self, query: str, k: int = 8) -> list[tuple[SourceDocument, float]]:
        """The `k` best documents for free text `query`, best first, with positive BM25 scores."""
        expression = fts_match_expression(query)
        if expression is None or k <= 0:
            return []
        # Rank on the full-text index alone, then read only the winners' rows: joining first carries
        # every matching document's text through the sort, which doubles the time on large indexes.
        ranked_sql = f"""
            SELECT rowid, -bm25(documents_fts, {TITLE_WEIGHT}, {CONTENT_WEIGHT}) AS score
            FROM documents_fts WHERE documents_fts MATCH ? ORDER BY score DESC LIMIT ?
        """
        with self._reading():
            ranked = self._conn.execute(ranked_sql, (expression, k + _TIE_MARGIN)).fetchall()
            if len(ranked) == k + _TIE_MARGIN and ranked[k - 1][1] == ranked[-1][1]:
                # Rows tied with the k-th may lie beyond what was fetched; the order (score, then URL)
                # needs the URLs of all of them.
                rows = self._conn.execute(_SEARCH_BY_URL, (expression, k)).fetchall()
            else:
                # Rows tied with the k-th row compete for the last places by URL: read them all.
                cut = ranked[k - 1][1] if len(ranked) >= k else None
                scores = {row_id: score for row_id, score in ranked if cut is None or score >= cut}
                marks = ", ".join("?" for _ in scores)
                found = self._conn.execute(
                    f"SELECT id, {_COLUMNS} FROM documents WHERE id IN ({marks})", list(scores)
                ).fetchall() if scores else []
                rows = sorted((row[1:] + (scores[row[0]],) for row in found), key=lambda r: (-r[7], r[0]))[:k]
        return [(_document(row), float(row[7])) for row in rows]

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
        stats = IndexStats()
        user_skip = on_skip if on_skip is not None else log_skip

        def report(file: Path, reason: str) -> None:
            stats.skipped += 1
            user_skip(file, reason)

        root_path = Path(path)
        files = corpus_files(root_path, on_skip=report)
        resolved = root_path.resolve()
        root = str(resolved)
        current = {_origin(root_path, resolved, file): file for file in files}
        with self._lock, self._guard(), _transaction(self._conn):
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
                stats.removed += self._conn.execute(
                    "DELETE FROM documents WHERE root = ? AND origin = ?", (root, origin)
                ).rowcount
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
        for doc in load_file(file, root=root_path, on_skip=report):
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
                stats.added += 1
            elif old[doc.url] == (doc.title, doc.source, doc.source_type, doc.content_hash, metadata):
                stats.unchanged += 1
            else:
                self._conn.execute(
                    "UPDATE documents SET title = ?, source = ?, source_type = ?, content = ?,"
                    " content_hash = ?, metadata = ? WHERE url = ?",
                    (doc.title, doc.source, doc.source_type, doc.content, doc.content_hash, metadata, doc.url),
                )
                stats.updated += 1
            seen.add(doc.url)
        for url in set(old) - seen:
            stats.removed += self._conn.execute("DELETE FROM documents WHERE url = ?", (url,)).rowcount
        self._conn.execute(
            "UPDATE documents SET origin_mtime_ns = ?, origin_size = ? WHERE root = ? AND origin = ?",
            (stat.st_mtime_ns, stat.st_size, root, origin),
        )

    def retain_roots(self, paths: Sequence[str | Path]) -> int:
        """Remove documents of every corpus path not in `paths`; returns how many were removed."""
        self._require_writable()
        keep = sorted({str(Path(p).resolve()) for p in paths})
        placeholders = ", ".join("?" for _ in keep)
        sql = "DELETE FROM documents" + (f" WHERE root NOT IN ({placeholders})" if keep else "")
        with self._lock, self._guard(), _transaction(self._conn):
            return self._conn.execute(sql, keep).rowcount

    def _require_writable(self) -> None:
        if self.read_only:
            raise IndexFileError(self.path, "opened read-only")

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
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
            raise IndexFileError(self.path, f"database error ({exc})") from None


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
