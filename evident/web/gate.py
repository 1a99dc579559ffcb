"""What a request must be before any route of the served app sees it: on the allowlist, within the
body bound, and authenticated where the LangGraph server would not authenticate it.

`RequestGate` is the `http.app`'s second middleware (after `BrowserGuard`), so it wraps every route
the LangGraph server registers, its meta and development routes included:

- **Routes are denied by default.** A path and method that `evident/web/routes.py` does not list
  get 404, for every caller and in every mode, before any route runs. At start-up the gate logs the
  server's routes that it refuses, so an operator sees what a LangGraph upgrade added.
- **Every route but the public ones is authenticated here**, with the rules of the API's own
  handler (evident/web/auth.py): routes outside the server's auth (`token` in the allowlist:
  /version, /info, /docs, /openapi.json), and the API's routes too, so that a refusal keeps its
  status and `WWW-Authenticate` whichever server hosts the app (Aegra answers every exception of
  the handler with a bare 401). The client address it admitted is kept for the handler
  (`admitted_client`): Aegra calls the handler with the headers alone.
- **Every request body is bounded whole** (`max_body_bytes`, default 1 MiB) before any route parses
  it: a larger `Content-Length` is refused at once with 413, and a body without one (chunked) is
  read up to the bound and refused as soon as it passes it. What is under the bound is replayed to
  the route unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from langgraph_sdk import Auth
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evident.context import ConfigError
from evident.web.admitted import admitted_client
from evident.web.auth import direct_client, identify
from evident.web.routes import ServedRoute, allowed_route, refused_routes, route_table
from evident.web.settings import ServerSettings, server_settings

log = logging.getLogger(__name__)

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class Refusal(Exception):
    """A request the gate answers itself: status, detail, extra headers."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _shown(routes: list[ServedRoute]) -> str:
    return ", ".join(f"{'/'.join(sorted(r.methods)) or r.kind} {r.path}" for r in routes)


def log_route_table(app: object) -> None:
    """Name, once at start-up, the routes of the real app that the allowlist serves and refuses."""
    table = list(route_table(getattr(app, "routes", None) or ()))
    refused = refused_routes(table)
    served = [route for route in table if route not in refused]
    log.info("evident: %d routes of the server are served (on the allowlist): %s", len(served), _shown(served))
    if refused:
        log.info("evident: %d routes of the server are refused (not on the allowlist): %s", len(refused),
                 _shown(refused))


def _authenticate(scope: Scope, settings: ServerSettings) -> None:
    # The same identity rules as the LangGraph API's own routes (evident/web/auth.py).
    try:
        identify(_header(scope, b"authorization"), admitted_client.get(), settings)
    except Auth.exceptions.HTTPException as exc:
        raise Refusal(exc.status_code, str(exc.detail), dict(exc.headers or {})) from None


def _declared_length(scope: Scope, limit: int) -> None:
    declared = _header(scope, b"content-length")
    if declared is None:
        return
    if not declared.strip().isdigit():
        raise Refusal(400, "invalid Content-Length")
    if int(declared) > limit:
        raise Refusal(413, f"the request body is too large: {int(declared)} bytes (the limit is {limit})")


async def read_bounded(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when the client went away; `Refusal` (413) past `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = bytes(message.get("body") or b"")
        size += len(chunk)
        if size > limit:
            raise Refusal(413, f"the request body is too large: over {limit} bytes (the limit)")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the route `body` in one message, then whatever the client sends next
    (a disconnect, which streaming routes listen for)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class RequestGate:
    """ASGI middleware: the route allowlist, the body bound, and authentication of every route that is
    not public."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            log_route_table(scope.get("app"))
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # no allowed route is a websocket
            await send({"type": "websocket.close", "code": 1008, "reason": "not found"})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            receive = await self._admitted(scope, receive)
        except Refusal as refusal:
            await respond(send, refusal.status, refusal.detail, refusal.headers)
            return
        await self.app(scope, receive, send)

    async def _admitted(self, scope: Scope, receive: Receive) -> Receive:
        method = str(scope.get("method") or "GET")
        route = allowed_route(method, str(scope.get("path") or ""))
        if route is None:
            raise Refusal(404, "Not Found")
        try:
            settings = server_settings()
        except ConfigError as exc:  # fail closed: a server whose own settings are broken serves nothing
            raise Refusal(503, str(exc)) from None
        admitted_client.set(direct_client(scope.get("client"), dict(scope.get("headers") or ())))
        _declared_length(scope, settings.max_body_bytes)
        if route.access != "public" and method != "OPTIONS":
            await asyncio.to_thread(_authenticate, scope, settings)  # token files: no blocking on the loop
        has_body = _header(scope, b"content-length") not in (None, "0") or _header(scope, b"transfer-encoding")
        if method in _BODILESS and not has_body:
            return receive
        body = await read_bounded(receive, settings.max_body_bytes)
        if body is None:
            raise Refusal(400, "the client closed the request before its body was read")
        return replaying(body, receive)


async def respond(send: Send, status: int, detail: str, headers: dict[str, Any] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    extra = [(str(k).lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
