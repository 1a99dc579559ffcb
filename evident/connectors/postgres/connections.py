"""Connections to one PostgreSQL source, reused between queries and threads.

A search borrows an idle connection (or opens one, within the source's deadline), runs in autocommit
with the source's statement timeout, and gives it back; a connection that failed is closed, not reused,
so a restarted server is reached again by the next query. Every psycopg error leaves here as a
`SourceFailure` that names no credential (`failures.failure_of`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from evident.connectors.postgres.dsn import PostgresDsn
from evident.connectors.postgres.failures import failure_of

IDLE_CONNECTIONS = 4  # kept open per source; more run at once when queries do, then are closed


class Connections:
    def __init__(self, dsn: PostgresDsn, *, connect_timeout_s: float, statement_timeout_ms: int | None) -> None:
        self.dsn = dsn
        # libpq's connect_timeout is whole seconds, at least 2 (it treats 1 as 2).
        self.connect_timeout = max(2, math.ceil(connect_timeout_s))
        self.statement_timeout_ms = statement_timeout_ms
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()

    def open(self, *, autocommit: bool = True, statement_timeout_ms: int | None = None) -> psycopg.Connection:
        """A new connection (the caller closes it); raises `SourceFailure`."""
        timeout = statement_timeout_ms if statement_timeout_ms is not None else self.statement_timeout_ms
        options = f"-c statement_timeout={timeout}" if timeout else ""
        try:
            return psycopg.connect(self.dsn.value(), autocommit=autocommit, connect_timeout=self.connect_timeout,
                                   options=options, application_name="evident")  # fmt: skip
        except psycopg.Error as exc:
            raise failure_of(exc, self.dsn) from None

    @contextmanager
    def borrowed(self) -> Iterator[psycopg.Connection]:
        """An autocommit connection with the statement timeout, for one search."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not _alive(conn):
            conn = None
        if conn is None:
            conn = self.open()
        try:
            yield conn
        except psycopg.Error as exc:
            conn.close()
            raise failure_of(exc, self.dsn, timeout_ms=self.statement_timeout_ms) from None
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if len(self._idle) < IDLE_CONNECTIONS and not conn.closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _alive(conn: psycopg.Connection) -> bool:
    """Whether an idle connection still reaches its server: one that a restart cut is closed and replaced,
    not handed to a query that would then fail (a loopback round trip, well under a millisecond)."""
    if conn.closed:
        return False
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        conn.close()
        return False
    return True
