"""The tables of a PostgreSQL source, in a schema of their own (`schema` setting, default `evident`).

`documents` holds each document's exact text (spans are offsets into `content`), its acl normalised to
visibility tokens (`acl_tokens`, `evident.connectors.visibility.document_tokens`: the search's WHERE
requires one the caller holds) and a weighted `tsvector`: title A, headings B, body D, so a question's
word in a title or a heading outranks the same word in the body. `vectors` holds the embedded windows
of each document for one model at a time (`meta` key 'vectors_model'), as the embedded index does.
"""

from __future__ import annotations

from psycopg import sql

SCHEMA_VERSION = 1
# A document's place in a search's sample of a word's documents (`search.sampled_share`): a hash of its url
# alone, so which documents a sample holds depends on no other document. Indexed as this expression; a
# search must write it the same way for PostgreSQL to use the index.
SAMPLE_KEY = "('x' || left(md5({url}), 8))::bit(32)::bigint"
SAMPLE_KEYS = 2**32  # the sample key is in [0, SAMPLE_KEYS)
# The two keys of `pg_advisory_xact_lock(int, int)`: this constant and the hash of the schema name, so
# two writers of one source take turns and writers of different sources do not wait for each other.
LOCK_CLASS = 0x45564454  # "EVDT"

_DDL = (
    "CREATE SCHEMA IF NOT EXISTS {schema}",
    "CREATE TABLE IF NOT EXISTS {schema}.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {schema}.documents (
        id bigserial PRIMARY KEY,
        url text NOT NULL UNIQUE,
        title text NOT NULL,
        headings text NOT NULL,
        source text NOT NULL,
        source_type text NOT NULL,
        content text NOT NULL,
        content_hash text NOT NULL,
        metadata text NOT NULL,
        acl_tokens text[] NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector({config}, title), 'A')
            || setweight(to_tsvector({config}, headings), 'B')
            || setweight(to_tsvector({config}, content), 'D')
        ) STORED
    )""",
    # Uncompressed: a search computes ts_rank over every matching document's tsvector, and decompressing
    # it was most of that cost (measured 2.3 times faster at 10,000 sections, benchmarks/scale.py).
    "ALTER TABLE {schema}.documents ALTER COLUMN tsv SET STORAGE EXTERNAL",
    "CREATE INDEX IF NOT EXISTS documents_tsv ON {schema}.documents USING gin (tsv)",
    "CREATE INDEX IF NOT EXISTS documents_acl ON {schema}.documents USING gin (acl_tokens)",
    "CREATE INDEX IF NOT EXISTS documents_sample ON {schema}.documents ((" + SAMPLE_KEY.format(url="url") + "))",
    """CREATE TABLE IF NOT EXISTS {schema}.vectors (
        document_id bigint NOT NULL REFERENCES {schema}.documents (id) ON DELETE CASCADE,
        ordinal integer NOT NULL,
        span_start integer NOT NULL,
        span_end integer NOT NULL,
        vector bytea NOT NULL,
        PRIMARY KEY (document_id, ordinal)
    )""",
)


def create_statements(schema: str, config: str) -> list[sql.Composed]:
    """The statements that create the source's tables where they are missing (run under the write lock)."""
    names = {"schema": sql.Identifier(schema), "config": sql.Literal(config)}
    return [sql.SQL(statement).format(**names) for statement in _DDL]


def table(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)
