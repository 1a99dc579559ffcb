"""503, not 500 or a cut-off body, when the server's database or broker cannot be reached.

A server that keeps threads and runs in PostgreSQL (Aegra, `evident serve --database`) raises its
drivers' connection errors out of a route while the database restarts or fails over; its generic
handler turns them into `500 "An unexpected error occurred"`. A client cannot tell that from a bug,
so it cannot know that retrying is right. These handlers answer `503` with `Retry-After` instead,
naming no host, port or query (the server log has those).

The wait routes (`/runs/wait`, `/threads/{id}/runs/wait`, `.../join`) answer `200` at once and send
keep-alive newlines until the run ends: a database lost meanwhile cuts the body off, which a client
reads as a broken connection. `HeldWhileWaiting` holds their response back until its first byte that
is not whitespace, so such a failure is still a `503`. A reverse proxy in front then needs a read
timeout longer than the longest run, since nothing reaches it before the answer.

Only the classes of drivers the host server has already imported are handled (looked up in
`sys.modules`, never imported here): under `langgraph dev` nothing but the kernel's connection
errors is, and its responses are the same, only held.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
DETAIL = "the server's database is unavailable: retry shortly"

# Connection-level failures of the drivers a database-backed LangGraph server uses, by module and
# class name. Errors of a query itself (a constraint, bad SQL) are not here: they stay 500s.
CONNECTION_ERRORS: tuple[tuple[str, str], ...] = (
    ("sqlalchemy.exc", "OperationalError"),
    ("sqlalchemy.exc", "InterfaceError"),
    ("sqlalchemy.exc", "TimeoutError"),  # the pool waited for a connection in vain
    ("asyncpg.exceptions", "PostgresConnectionError"),
    ("asyncpg.exceptions", "CannotConnectNowError"),  # "the database system is starting up"
    ("asyncpg.exceptions", "OperatorInterventionError"),  # "terminating connection due to administrator command"
    ("asyncpg.exceptions", "ConnectionDoesNotExistError"),
    ("asyncpg.exceptions._base", "InterfaceError"),
    # A connection whose protocol state the outage broke (or a server that is no longer the primary):
    # the same statement on a new connection succeeds, so the caller is told to retry.
    ("asyncpg.exceptions", "InternalClientError"),
    ("psycopg", "OperationalError"),
    ("psycopg_pool", "PoolTimeout"),
    ("redis.exceptions", "ConnectionError"),
    ("redis.exceptions", "TimeoutError"),
)
# The kernel's refusals (ConnectionRefusedError, ConnectionResetError) reach a route unwrapped when a
# driver connects anew; a socket to anything else is not opened while a route handles a request.
BUILTIN_ERRORS: tuple[type[Exception], ...] = (ConnectionError,)

Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]


def loaded_connection_errors(modules: Mapping[str, object] | None = None) -> list[type[Exception]]:
    """The connection-error classes of the drivers already imported (`modules`: `sys.modules`)."""
    found: list[type[Exception]] = list(BUILTIN_ERRORS)
    for module_name, class_name in CONNECTION_ERRORS:
        module = (sys.modules if modules is None else modules).get(module_name)
        cls = getattr(module, class_name, None)
        if isinstance(cls, type) and issubclass(cls, Exception) and cls not in found:
            found.append(cls)
    return found


async def database_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("evident: %s %s: the database or broker is unreachable (%s: %s): 503", request.method,
                request.url.path, type(exc).__name__, exc)
    return JSONResponse({"detail": DETAIL}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})


def unavailable_handlers(modules: Mapping[str, object] | None = None) -> dict[int | type[Exception], Handler]:
    """Exception handlers for the app: each loaded connection-error class → 503."""
    return {cls: database_unavailable for cls in loaded_connection_errors(modules)}


WAIT_ROUTES = re.compile(r"(?:/threads/[^/]+)?/runs/wait|/threads/[^/]+/runs/[^/]+/join")


def caused_by_lost_connection(exc: BaseException, modules: Mapping[str, object] | None = None) -> bool:
    """Whether `exc`, or what it was raised from, is a loaded driver's connection error or an error
    SQLAlchemy marked as a disconnect. (Starlette re-raises an error it has a handler for as a
    `RuntimeError` once the response has started.)"""
    classes = tuple(loaded_connection_errors(modules))
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, classes) or getattr(current, "connection_invalidated", False) is True:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class _Held:
    """A `send` that keeps a response's start and leading whitespace until the body says more."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.start: Message | None = None
        self.held: list[bytes] = []
        self.released = False

    async def __call__(self, message: Message) -> None:
        if self.released:
            await self.send(message)
        elif message["type"] == "http.response.start":
            self.start = message
        elif message["type"] == "http.response.body":
            chunk = bytes(message.get("body") or b"")
            self.held.append(chunk)
            more = bool(message.get("more_body"))
            if chunk.strip() or not more:
                await self._release(more)
        else:
            await self.send(message)

    async def _release(self, more: bool) -> None:
        self.released = True
        if self.start is not None:
            await self.send(self.start)
        await self.send({"type": "http.response.body", "body": b"".join(self.held), "more_body": more})


class _Watched:
    """A `send` that only notes whether the response has started."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.released = False

    async def __call__(self, message: Message) -> None:
        self.released = True
        await self.send(message)


class HeldWhileWaiting:
    """ASGI middleware: a route's error caused by a lost database is a 503 while nothing of its
    response has been sent, and a wait route's response is held until its body starts (see the
    module's text) so that this holds for the whole wait."""

    def __init__(self, app: ASGIApp, modules: Mapping[str, object] | None = None) -> None:
        self.app = app
        self.modules = modules  # the drivers' modules, `sys.modules` unless a test gives its own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        waits = WAIT_ROUTES.fullmatch(str(scope.get("path") or "")) is not None
        held: _Held | _Watched = _Held(send) if waits else _Watched(send)
        try:
            await self.app(scope, receive, held)
        except Exception as exc:
            if held.released or not caused_by_lost_connection(exc, self.modules):
                raise
            log.warning("evident: %s %s: the database or broker was lost (%s: %s): 503", scope.get("method"),
                        scope.get("path"), type(exc).__name__, exc)
            body = json.dumps({"detail": DETAIL}).encode("utf-8")
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_S).encode())]})
            await send({"type": "http.response.body", "body": body})
