"""Opening the embedded index's SQLite file: creating, checking and migrating its schema."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evident.connectors.index_schema import MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION


class IndexFileError(Exception):
    """The index file cannot be used (not SQLite, not ours, corrupt, newer schema)."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = Path(path)
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"



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
        raise IndexFileError(path, f"not a usable EvidenT index ({exc})") from None
    return conn

def _prepare(conn: sqlite3.Connection, path: Path, read_only: bool) -> None:
    conn.execute("PRAGMA busy_timeout = 5000")
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
