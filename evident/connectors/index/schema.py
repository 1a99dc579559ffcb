"""The embedded index's SQLite schema, and the migrations between its versions."""

from __future__ import annotations

SCHEMA_VERSION = 1

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
)

# version -> statements that upgrade an index from the previous version; empty until schema 2 exists.
# (Statement lists, not scripts: executescript() would commit the surrounding transaction.)
MIGRATIONS: dict[int, tuple[str, ...]] = {}
