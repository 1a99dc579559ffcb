"""Opening the embedded index's SQLite file: creating, checking and migrating its schema; its write lock."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from evident.connectors.index.schema import BACKFILLS, MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000  # a reader waiting for a checkpoint, or a writer outside the file lock
_DAMAGE_SIGNS = ("malformed", "not a database", "disk i/o error", "corrupt")


class IndexFileError(Exception):
    """The index file cannot be used (not SQLite, not ours, corrupt, newer schema)."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = Path(path)
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def rebuild_hint(path: Path) -> str:
    return f"rebuild it from its sources with `evident index --rebuild SOURCE... --index {path}`"


def database_error(path: Path, exc: sqlite3.DatabaseError) -> IndexFileError:
    """The one-line error for an SQLite failure; a damaged file says how to rebuild it."""
    text = str(exc)
    if any(sign in text.lower() for sign in _DAMAGE_SIGNS):
        return IndexFileError(path, f"the index file is damaged ({text}); {rebuild_hint(path)}")
    return IndexFileError(path, f"database error ({text})")


class WriteLock:
    """`<index>.lock`, held while writing: a second writer waits (up to `timeout_s`) instead of failing.

    SQLite alone would make a second `evident index` give up with "database is locked" once its busy
    timeout ran out under the first one's long transaction; the Tantivy directory has its own lock,
    taken per commit. One lock around both keeps writers strictly one after the other. Re-entrant
    within a thread, so a rebuild inside a write does not wait for itself.
    """

    def __init__(self, path: Path, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._lock = FileLock(f"{path}.lock")

    @contextmanager
    def hold(self) -> Iterator[None]:
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            log.warning("%s: another process is writing this index; waiting up to %.0f s", self.path, self.timeout_s)
            try:
                self._lock.acquire(timeout=self.timeout_s)
            except Timeout:
                raise IndexFileError(
                    self.path,
                    f"another process kept this index locked for {self.timeout_s:.0f} s; try again when it is done",
                ) from None
        try:
            yield
        finally:
            self._lock.release()


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """An autocommit connection to the index file at `path`, created or migrated as needed."""
    if path.is_dir():
        raise IndexFileError(path, "is a folder, not an index file")
    if read_only and not path.exists():
        raise IndexFileError(path, "no such index")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    target = f"{path.resolve().as_uri()}?mode=ro" if read_only else str(path)
    try:
        # Autocommit mode: transactions are opened explicitly, so their extent is visible here.
        conn = sqlite3.connect(target, uri=read_only, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise IndexFileError(path, f"cannot open ({exc})") from None
    try:
        _prepare(conn, path, read_only)
    except IndexFileError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        if any(sign in str(exc).lower() for sign in _DAMAGE_SIGNS):
            raise database_error(path, exc) from None
        raise IndexFileError(path, f"not a usable EvidenT index ({exc})") from None
    return conn

def _prepare(conn: sqlite3.Connection, path: Path, read_only: bool) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    if "evident_meta" not in tables:
        if tables:
            raise IndexFileError(path, "is an SQLite database but not an EvidenT index")
        if read_only:
            raise IndexFileError(path, "is empty (build it with add_corpus first)")
        _create(conn, path)
        return
    row = conn.execute("SELECT value FROM evident_meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row and str(row[0]).isdigit() else 0
    if version > SCHEMA_VERSION:
        raise IndexFileError(path, f"written by a newer EvidenT (schema {version} > {SCHEMA_VERSION})")
    if version < SCHEMA_VERSION:
        if read_only:
            raise IndexFileError(path, f"needs migration from schema {version}; open it writable once")
        _migrate(conn, path, version)

def _create(conn: sqlite3.Connection, path: Path) -> None:
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
            raise IndexFileError(path, "this SQLite build has no FTS5 support") from None
        raise

def _migrate(conn: sqlite3.Connection, path: Path, version: int) -> None:
    for target in range(version + 1, SCHEMA_VERSION + 1):
        if target not in MIGRATIONS:
            raise IndexFileError(path, f"cannot migrate from schema {version}; rebuild the index")
        with _transaction(conn):
            for statement in MIGRATIONS[target]:
                conn.execute(statement)
            if target in BACKFILLS:
                BACKFILLS[target](conn)
            conn.execute("UPDATE evident_meta SET value = ? WHERE key = 'schema_version'", (str(target),))


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
