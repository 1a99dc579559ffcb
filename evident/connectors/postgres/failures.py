"""What a PostgreSQL failure means for one query or one refresh, said without the connection string.

libpq's messages name the host and sometimes more; ours name only `PostgresDsn.where`, the kind of
problem and what to do, so a message can go to `source_errors`, a log or a trace as it is.
"""

from __future__ import annotations

import psycopg
from psycopg import errors

from evident.connectors.postgres.dsn import PostgresDsn
from evident.connectors.remote.http import one_line
from evident.connectors.source import SourceFailure

# SQLSTATEs (PostgreSQL's errcodes): invalid authorization, invalid password, unknown database.
_AUTHENTICATION = frozenset({"28000", "28P01"})
_NO_DATABASE = "3D000"


def failure_of(exc: psycopg.Error, dsn: PostgresDsn, *, timeout_ms: int | None = None) -> SourceFailure:
    """The `SourceFailure` of a psycopg error raised while connecting to or searching `dsn`."""
    text = str(exc)
    state = exc.sqlstate or ""
    if isinstance(exc, errors.QueryCanceled):
        limit = f" ({timeout_ms} ms)" if timeout_ms else ""
        return SourceFailure(f"{dsn.where}: the database cancelled the search at its statement timeout{limit}",
                             kind="timeout")
    if state in _AUTHENTICATION or "authentication failed" in text or "no password supplied" in text:
        return SourceFailure(f"{dsn.where}: authentication failed; {dsn.hint()}")
    if state == _NO_DATABASE or ("database" in text and "does not exist" in text):
        return SourceFailure(f"{dsn.where}: the database does not exist")
    if isinstance(exc, errors.UndefinedTable):
        return SourceFailure(f"{dsn.where}: not indexed yet; run `evident index --config <evident.toml>`",
                             kind="config")
    if "timeout expired" in text:
        return SourceFailure(f"{dsn.where}: no connection within the source's timeout", kind="timeout")
    if isinstance(exc, psycopg.OperationalError) and ("connect" in text or "Connection refused" in text):
        return SourceFailure(f"cannot connect to {dsn.where} (server down, unreachable or refusing connections)")
    return SourceFailure(f"{dsn.where}: {type(exc).__name__}: {redacted(text, dsn)}")


def redacted(text: str, dsn: PostgresDsn) -> str:
    """`text` on one line without the connection string or its password."""
    flat = one_line(text)
    for secret in dsn.secrets:
        value = secret.get_secret_value()
        if len(value) >= 4:
            flat = flat.replace(value, "***")
        elif value and value in flat:  # too short to cut out without mangling the rest: say nothing
            return "(detail withheld: it may quote the credentials)"
    return flat
