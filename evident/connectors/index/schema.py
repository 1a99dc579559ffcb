"""The embedded index's SQLite schema, and the migrations between its versions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from evident.connectors.visibility import document_tokens

SCHEMA_VERSION = 5

# A document's visibility tokens (`evident.connectors.visibility.document_tokens` of its acl): the FTS5
# fallback requires one the caller matches in its WHERE clause, and the Tantivy mirror is rebuilt from them.
VISIBILITY: tuple[str, ...] = (
    """CREATE TABLE document_visibility (
        token TEXT NOT NULL,
        document_id INTEGER NOT NULL,
        PRIMARY KEY (token, document_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX document_visibility_document ON document_visibility (document_id)",
    """CREATE TRIGGER documents_visibility_delete AFTER DELETE ON documents BEGIN
        DELETE FROM document_visibility WHERE document_id = old.id;
    END""",
)

# How many tokens the Tantivy mirror's `text` field of a document has (`ranking.TantivyMirror.text_tokens`):
# a caller's average field length sums them over the documents the caller may see. NULL until the
# mirror is rebuilt after a migration (which a MIRROR_FORMAT bump forces), which fills them.
LENGTHS: tuple[str, ...] = ("ALTER TABLE documents ADD COLUMN text_tokens INTEGER",)

# The embedded windows of each document (evident/embeddings/windows.py) and their unit vectors, for one
# model at a time (`evident_meta` key 'vectors_model'): a document's vectors go when it is deleted or its
# text changes, and all of them when the model changes (evident/connectors/index/vectors.py).
# A rowid table, not WITHOUT ROWID: a 1.5 kB vector per row is far past the size where SQLite advises
# WITHOUT ROWID, and measured 2.3 times the file size and twice the time to read them all.
VECTORS: tuple[str, ...] = (
    """CREATE TABLE passage_vectors (
        document_id INTEGER NOT NULL,
        ordinal INTEGER NOT NULL,
        span_start INTEGER NOT NULL,
        span_end INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (document_id, ordinal)
    )""",
    """CREATE TRIGGER documents_vectors_delete AFTER DELETE ON documents BEGIN
        DELETE FROM passage_vectors WHERE document_id = old.id;
    END""",
    """CREATE TRIGGER documents_vectors_update AFTER UPDATE OF title, content ON documents BEGIN
        DELETE FROM passage_vectors WHERE document_id = old.id;
    END""",
)

# The files of a corpus folder that a refresh skipped (unreadable, binary, a copy of another file's page), with
# the stat they had and why: until a file changes, a refresh (every `evident ask` runs one) neither reads it
# again nor repeats its warning.
SKIPPED: tuple[str, ...] = (
    """CREATE TABLE skipped_files (
        root TEXT NOT NULL,
        origin TEXT NOT NULL,
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        reason TEXT NOT NULL,
        settings TEXT NOT NULL,
        PRIMARY KEY (root, origin)
    ) WITHOUT ROWID""",
)

SCHEMA_V1: tuple[str, ...] = (
    "CREATE TABLE evident_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # `id` is the FTS rowid; a URL primary key would leave the rowid implicit, and VACUUM may renumber
    # implicit rowids, silently detaching the full-text index from its documents.
    """CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        source TEXT NOT NULL,
        source_type TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        metadata TEXT NOT NULL,
        root TEXT NOT NULL,
        origin TEXT NOT NULL,
        origin_mtime_ns INTEGER NOT NULL,
        origin_size INTEGER NOT NULL
    )""",
    "CREATE INDEX documents_root_origin ON documents (root, origin)",
    """CREATE VIRTUAL TABLE documents_fts USING fts5 (
        title, content,
        content = 'documents', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
    """CREATE TRIGGER documents_fts_insert AFTER INSERT ON documents BEGIN
        INSERT INTO documents_fts (rowid, title, content) VALUES (new.id, new.title, new.content);
    END""",
    """CREATE TRIGGER documents_fts_delete AFTER DELETE ON documents BEGIN
        INSERT INTO documents_fts (documents_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
    END""",
    # Only title/content changes touch the full-text index; refreshing file stats does not.
    """CREATE TRIGGER documents_fts_update AFTER UPDATE OF title, content ON documents BEGIN
        INSERT INTO documents_fts (documents_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
        INSERT INTO documents_fts (rowid, title, content) VALUES (new.id, new.title, new.content);
    END""",
    *VISIBILITY,
    *LENGTHS,
    *VECTORS,
    *SKIPPED,
)


def store_visibility(conn: sqlite3.Connection, document_id: int, acl: object) -> None:
    """Replace the visibility tokens of document `document_id` by those of `acl`."""
    conn.execute("DELETE FROM document_visibility WHERE document_id = ?", (document_id,))
    conn.executemany(
        "INSERT INTO document_visibility (token, document_id) VALUES (?, ?)",
        [(token, document_id) for token in document_tokens(acl)],
    )


def _backfill_visibility(conn: sqlite3.Connection) -> None:
    for document_id, metadata in conn.execute("SELECT id, metadata FROM documents").fetchall():
        store_visibility(conn, document_id, json.loads(metadata).get("acl"))


# version -> statements that upgrade an index from the previous version, then what must be computed in Python.
# (Statement lists, not scripts: executescript() would commit the surrounding transaction.)
MIGRATIONS: dict[int, tuple[str, ...]] = {2: VISIBILITY, 3: LENGTHS, 4: VECTORS, 5: SKIPPED}
BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {2: _backfill_visibility}
