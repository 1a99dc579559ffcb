"""Writing a PostgreSQL source: its documents made exactly those of its corpus paths, in one transaction.

The paths are read as the embedded index reads them (`loaders.load_corpus`: folders, JSONL files, long
documents as sections). Then, in one transaction under the source's advisory lock (a second writer waits
for the first, then sees what it wrote): documents whose url is new are inserted, those whose content
hash, title or metadata changed are updated (and lose their vectors), unchanged ones are left alone and
documents no path holds any more are deleted. Anything that goes wrong (a missing path, a url claimed
twice, no documents at all, the database) rolls it all back: readers see the old documents or the new.
A refresh that changes any document bumps the source's `generation` (in `meta`), which keys the
searches' cached counts.

Vectors (`embed_missing`) are written afterwards, in transactions of COMMIT_EVERY documents, so an
interrupted embedding keeps what it finished; a document whose text changed has none until then and is
embedded at query time meanwhile.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from evident.alignment.models import SourceDocument
from evident.connectors.index.corpus import CorpusError, CorpusLimits, IndexStats, SkipHandler, url_conflict
from evident.connectors.index.loaders import load_corpus, log_skip
from evident.connectors.index.vectors import COMMIT_EVERY, EmbedProgress, EmbedStats, vectors_key
from evident.connectors.postgres.connections import Connections
from evident.connectors.postgres.failures import failure_of
from evident.connectors.postgres.schema import LOCK_CLASS, SCHEMA_VERSION, create_statements, table
from evident.connectors.postgres.search import stored_model
from evident.connectors.visibility import document_tokens
from evident.embeddings.scorer import SemanticScorer
from evident.embeddings.windows import document_windows

_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


class RefreshStats(IndexStats):
    """The counts of one refresh, and the documents the table holds after it."""

    documents: int = 0


def headings(content: str) -> str:
    """The Markdown headings of a text, one per line: the tsvector's B weight."""
    return "\n".join(match.group(1) for match in _HEADING.finditer(content))


def read_paths(paths: Sequence[Path], limits: CorpusLimits, report: SkipHandler) -> list[SourceDocument]:
    """Every document of `paths`, each url once; raises `CorpusError` as the embedded index's refresh does."""
    if not paths:
        raise CorpusError(".", "no corpus paths given")
    for path in paths:
        if not path.exists():
            raise CorpusError(path, "no such file or directory (the source was left as it was)")
    found: dict[str, tuple[SourceDocument, Path]] = {}
    for path in paths:
        for doc in load_corpus(path, on_skip=report, limits=limits):
            if doc.url in found:
                raise url_conflict(path, doc, found[doc.url][1], found[doc.url][0])
            if "\x00" in doc.content or "\x00" in doc.title:
                # PostgreSQL's text cannot hold NUL: storing the text without them would shift every span.
                report(path, f"{doc.url}: the text holds NUL characters, which PostgreSQL cannot store")
                continue
            found[doc.url] = (doc, path)
    if not found:
        raise CorpusError(", ".join(map(str, paths)), "no documents found (the source was left as it was)")
    return [doc for doc, _ in found.values()]


def _metadata(doc: SourceDocument) -> str:
    # Sorted keys make the stored text canonical, so an unchanged document compares equal.
    return json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True, default=str)


def _lock(conn: psycopg.Connection, schema: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, schema))


def prepare_schema(conn: psycopg.Connection, schema: str, config: str) -> None:
    """Create the source's tables where missing, and refuse tables built for another text search config."""
    for statement in create_statements(schema, config):
        conn.execute(statement)
    meta = table(schema, "meta")
    rows: dict[str, str] = dict(conn.execute(sql.SQL("SELECT key, value FROM {}").format(meta)).fetchall())
    if not rows:
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('schema_version', %s), ('text_search_config', %s)").format(meta),
                     (str(SCHEMA_VERSION), config))  # fmt: skip
        return
    if rows.get("text_search_config") != config:
        raise CorpusError(schema, f"schema {schema!r} was built with text_search_config "
                                  f"{rows.get('text_search_config')!r}; drop it or use another schema")
    if rows.get("schema_version") != str(SCHEMA_VERSION):
        raise CorpusError(schema, f"schema {schema!r} has version {rows.get('schema_version')}, "
                                  f"this EvidenT writes version {SCHEMA_VERSION}")


def refresh(
    connections: Connections,
    schema: str,
    config: str,
    paths: Sequence[Path],
    *,
    limits: CorpusLimits,
    on_skip: SkipHandler | None = None,
) -> RefreshStats:
    """Make the source hold exactly the documents of `paths` (module docstring). Raises `CorpusError` or
    `SourceFailure`; either way the source keeps what it had."""
    stats = RefreshStats()
    user_skip = on_skip if on_skip is not None else log_skip

    def report(path: Path, reason: str) -> None:
        stats.skipped += 1
        user_skip(path, reason)

    docs = read_paths(paths, limits, report)
    conn = connections.open(autocommit=False, statement_timeout_ms=0)
    try:
        with conn.transaction():
            _lock(conn, schema)
            prepare_schema(conn, schema, config)
            _write(conn, schema, docs, stats)
    except psycopg.Error as exc:
        raise failure_of(exc, connections.dsn) from None
    finally:
        conn.close()
    return stats


def _write(conn: psycopg.Connection, schema: str, docs: Sequence[SourceDocument], stats: RefreshStats) -> None:
    documents, vectors = table(schema, "documents"), table(schema, "vectors")
    existing = conn.execute(sql.SQL("SELECT url, content_hash, title, source, source_type, metadata FROM {}")
                            .format(documents))  # fmt: skip
    known = {row[0]: tuple(row[1:]) for row in existing}
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    for doc in docs:
        metadata = _metadata(doc)
        old = known.get(doc.url)
        row = (doc.title, headings(doc.content), doc.source, doc.source_type, doc.content, doc.content_hash,
               metadata, document_tokens(doc.metadata.get("acl")), doc.url)  # fmt: skip
        if old is None:
            inserts.append(row)
        elif old == (doc.content_hash, doc.title, doc.source, doc.source_type, metadata):
            stats.unchanged += 1
        else:
            updates.append(row)
            if (old[0], old[1]) != (doc.content_hash, doc.title):
                conn.execute(sql.SQL("DELETE FROM {} WHERE document_id = (SELECT id FROM {} WHERE url = %s)")
                             .format(vectors, documents), (doc.url,))  # fmt: skip
    with conn.cursor() as cur:
        cur.executemany(sql.SQL(
            "INSERT INTO {} (title, headings, source, source_type, content, content_hash, metadata, acl_tokens, url)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)").format(documents), inserts)  # fmt: skip
        cur.executemany(sql.SQL(
            "UPDATE {} SET title = %s, headings = %s, source = %s, source_type = %s, content = %s,"
            " content_hash = %s, metadata = %s, acl_tokens = %s WHERE url = %s"
        ).format(documents), updates)  # fmt: skip
    stats.added, stats.updated = len(inserts), len(updates)
    gone = sorted(set(known) - {doc.url for doc in docs})
    if gone:
        conn.execute(sql.SQL("DELETE FROM {} WHERE url = ANY(%s)").format(documents), (gone,))
    stats.removed = len(gone)
    stats.documents = len(docs)
    if stats.added or stats.updated or stats.removed:
        # A new generation: the searches' cached counts (`search.VisibleCounts`) of the old one are not used again.
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('generation', '1') ON CONFLICT (key) DO UPDATE"
                             " SET value = ({}.value::bigint + 1)::text").format(table(schema, "meta"),
                                                                                  table(schema, "meta")))  # fmt: skip


def unembedded(conn: psycopg.Connection, schema: str, model_id: str) -> list[int]:
    """The ids of the documents with no vectors of `model_id` (all of them for another model's)."""
    documents, vectors = table(schema, "documents"), table(schema, "vectors")
    if stored_model(conn, schema) != vectors_key(model_id):
        return [int(r[0]) for r in conn.execute(sql.SQL("SELECT id FROM {} ORDER BY id").format(documents))]
    return [int(r[0]) for r in conn.execute(sql.SQL(
        "SELECT id FROM {} d WHERE NOT EXISTS (SELECT 1 FROM {} v WHERE v.document_id = d.id) ORDER BY id"
    ).format(documents, vectors))]


def embed_missing(
    connections: Connections, schema: str, scorer: SemanticScorer, progress: EmbedProgress | None = None,
    stop: Callable[[], bool] | None = None,
) -> EmbedStats:
    """Give every document without vectors of `scorer`'s model its windows' vectors (module docstring);
    `stop()` true before a step ends the run there. Raises what the embeddings raise, or `SourceFailure`;
    what was committed stays."""
    started = time.perf_counter()
    key = vectors_key(scorer.model_id)
    documents, vectors, meta = table(schema, "documents"), table(schema, "vectors"), table(schema, "meta")
    conn = connections.open(autocommit=False, statement_timeout_ms=0)
    try:
        with conn.transaction():
            _lock(conn, schema)
            stored = stored_model(conn, schema)
            reset = stored not in (None, key)
            if stored != key:
                conn.execute(sql.SQL("DELETE FROM {}").format(vectors))
                conn.execute(sql.SQL("INSERT INTO {} VALUES ('vectors_model', %s) ON CONFLICT (key) DO UPDATE"
                                     " SET value = excluded.value").format(meta), (key,))  # fmt: skip
            todo = unembedded(conn, schema, scorer.model_id)
        done = windows = 0
        for first in range(0, len(todo), COMMIT_EVERY):
            if stop is not None and stop():
                return EmbedStats(done, windows, time.perf_counter() - started, scorer.model_id, reset, stopped=True)
            with conn.transaction():
                _lock(conn, schema)
                rows = conn.execute(sql.SQL("SELECT id, title, content FROM {} WHERE id = ANY(%s) ORDER BY id")
                                    .format(documents), (todo[first : first + COMMIT_EVERY],)).fetchall()  # fmt: skip
                windows += _embed_rows(conn, vectors, scorer, rows)
            done += len(rows)
            if progress is not None:
                progress(done, len(todo))
    except psycopg.Error as exc:
        raise failure_of(exc, connections.dsn) from None
    finally:
        conn.close()
    return EmbedStats(done, windows, time.perf_counter() - started, scorer.model_id, reset)


def _embed_rows(conn: psycopg.Connection, vectors: sql.Identifier, scorer: SemanticScorer,
                rows: Sequence[tuple[Any, ...]]) -> int:  # fmt: skip
    planned = [(int(i), *document_windows(str(title), str(content))) for i, title, content in rows]
    embedded = scorer.embed_texts([text for _, _, texts in planned for text in texts])
    at = 0
    values: list[tuple[int, int, int, int, bytes]] = []
    for document_id, spans, texts in planned:
        values += [(document_id, n, s, e, embedded[at + n].astype(np.float32).tobytes())
                   for n, (s, e) in enumerate(spans)]  # fmt: skip
        at += len(texts)
    with conn.cursor() as cur:
        # ON CONFLICT: a document embedded by another writer since `unembedded` keeps its vectors.
        cur.executemany(sql.SQL("INSERT INTO {} (document_id, ordinal, span_start, span_end, vector)"
                                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING").format(vectors), values)
    return at

