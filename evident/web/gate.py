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
- **Every body is checked for what it may carry** (evident/web/bodies.py): JSON a server can store,
  what a request may write into a thread (by a run's `input` or `command.update`, or `update_state`),
  fields that would steer tracing, and metadata bounded as a whole. Where the bound depends on what a
  thread or assistant already holds (`update_state`, `command.update`, a PATCH of metadata), the gate
  reads it first, in process and as the caller (evident/web/inprocess.py).
- **One user's runs are bounded** (evident/web/fairness.py): a request that would take an authenticated
  caller past `max_active_runs` runs pending or running (default 4) is answered `429` with `Retry-After`.
  Without authentication every caller is the one anonymous user, and there is no one to share with.
- **`POST /threads/{id}/state/checkpoint` without a checkpoint id** (what `RemoteGraph.get_state` sends
  for a thread's latest state) is served as `GET /threads/{id}/state`, which it means: Aegra answers
  it with a 400 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any
from urllib.parse import urlencode

from langgraph_sdk import Auth
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evident.request_settings import ContextWithDefaults
from evident.settings import ConfigError, ServerSettings
from evident.web import bodies
from evident.web.admitted import admitted_client
from evident.web.auth import direct_client, identify
from evident.web.bodies import Refusal
from evident.web.browser import header
from evident.web.fairness import RETRY_AFTER_S, RunSlots, TooManyRuns, created_runs
from evident.web.inprocess import read_as_caller
from evident.web.routes import ServedRoute, allowed_route, refused_routes, route_table
from evident.web.settings import server_settings

log = logging.getLogger(__name__)

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})
RUN_ROUTES = frozenset({"/runs", "/runs/wait", "/runs/stream", "/threads/{thread_id}/runs",
                        "/threads/{thread_id}/runs/wait", "/threads/{thread_id}/runs/stream"})
# Routes that answer as soon as their runs exist, with the runs: they are counted until they end.
BACKGROUND_ROUTES = frozenset({"/runs", "/threads/{thread_id}/runs", "/runs/batch"})
# What the gate hands itself in the request's scope: who the caller is, and how many runs it creates.
USER_KEY, RUNS_KEY = "evident.user", "evident.runs"
_THREAD = re.compile(r"/threads/([^/]+)")


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


def _authenticate(scope: Scope, settings: ServerSettings) -> str:
    """The caller's identity, by the same rules as the LangGraph API's own routes (evident/web/auth.py)."""
    try:
        return str(identify(header(scope, b"authorization"), admitted_client.get(), settings)["identity"])
    except Auth.exceptions.HTTPException as exc:
        raise Refusal(exc.status_code, str(exc.detail), dict(exc.headers or {})) from None


def _declared_length(scope: Scope, limit: int) -> None:
    declared = header(scope, b"content-length")
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
        self.slots = RunSlots()

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
            scope, receive = await self._admitted(scope, receive)
        except Refusal as refusal:
            await respond(send, refusal.status, refusal.detail, refusal.headers)
            return
        if scope.get(RUNS_KEY):
            await self._counted(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request that creates runs, within the caller's share of the server."""
        settings = server_settings()
        if not settings.auth_configured:  # one caller, the anonymous one: no other user to be fair to
            await self.app(scope, receive, send)
            return
        user, wanted = str(scope[USER_KEY]), int(scope[RUNS_KEY])
        try:
            await self.slots.admit(user, wanted, settings.max_active_runs, scope)
        except TooManyRuns as exc:
            await respond(send, 429, str(exc), {"Retry-After": str(RETRY_AFTER_S)})
            return
        background = scope.get("evident.route") in BACKGROUND_ROUTES
        status, chunks = 0, []

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif background and message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body") or b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            created = created_runs(b"".join(chunks)) if background and 200 <= status < 300 else []
            self.slots.release(user, wanted, created)

    async def _admitted(self, scope: Scope, receive: Receive) -> tuple[Scope, Receive]:
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
            # token files: no blocking on the loop
            scope = {**scope, USER_KEY: await asyncio.to_thread(_authenticate, scope, settings)}
        has_body = header(scope, b"content-length") not in (None, "0") or header(scope, b"transfer-encoding")
        if method in _BODILESS and not has_body:
            return scope, receive
        body = await read_bounded(receive, settings.max_body_bytes)
        if body is None:
            raise Refusal(400, "the client closed the request before its body was read")
        if method in _BODILESS:
            return scope, replaying(body, receive)
        scope = await checked_body({**scope, "evident.route": route.path}, route.path, body, settings)
        return scope, replaying(b"" if scope.get("method") == "GET" else body, receive)


def _deployment() -> ContextWithDefaults:
    try:
        return ContextWithDefaults()
    except ConfigError as exc:
        raise Refusal(503, str(exc)) from None


def _body_checks(route: str, path: str, body: bytes, settings: ServerSettings) -> tuple[Any, Any]:
    """The synchronous checks of a body (parsing, up to 1 MiB: off the event loop). Returns the parsed
    body and what the gate must still check against the thread's conversation (messages written by
    `update_state` or `command.update`), if anything."""
    parsed = bodies.parsed_body(body, settings.max_json_depth)
    found = _THREAD.match(path)
    thread_id = found.group(1) if found else None
    if route in RUN_ROUTES:
        written = bodies.run_problem(parsed, thread_id, _deployment(), settings.max_metadata_bytes)
        return parsed, written if thread_id else None  # a run without a thread starts an empty one
    if route == "/runs/batch":
        if not isinstance(parsed, list) or not parsed:
            raise Refusal(422, "a batch is a non-empty list of runs")
        for run in parsed:
            bodies.run_problem(run, None, _deployment(), settings.max_metadata_bytes)
        return parsed, None
    if route == "/threads/{thread_id}/state":
        assert thread_id is not None
        return parsed, bodies.state_update_problem(parsed, thread_id, _deployment())
    if route == "/threads/{thread_id}/state/checkpoint":
        checkpoint = parsed.get("checkpoint") if isinstance(parsed, dict) else None
        bodies.checkpoint_problem(checkpoint, thread_id)
    elif route == "/threads" and isinstance(parsed, dict) and parsed.get("supersteps"):
        raise Refusal(422, "supersteps are not accepted: a thread starts empty, and a run or update_state "
                          "writes into it")
    elif route == "/threads/search" and isinstance(parsed, dict) and parsed.get("values"):
        raise Refusal(422, "a values filter is not supported: search threads by metadata, status or ids")
    elif route in ("/assistants", "/assistants/{assistant_id}") and isinstance(parsed, dict):
        bodies.metadata_problem(parsed, settings.max_metadata_bytes)
    return parsed, None


async def checked_body(scope: Scope, route: str, body: bytes, settings: ServerSettings) -> Scope:
    """`scope` once its body passed the checks of evident/web/bodies.py (`Refusal` otherwise),
    rewritten where the request means another route."""
    path = str(scope.get("path") or "")
    parsed, written = await asyncio.to_thread(_body_checks, route, path, body, settings)
    method = str(scope.get("method"))
    if route in RUN_ROUTES or route == "/runs/batch":
        scope = {**scope, RUNS_KEY: len(parsed) if isinstance(parsed, list) else 1}
    if written is not None:
        checkpoint = parsed.get("checkpoint") if isinstance(parsed, dict) else None
        checkpoint_id = parsed.get("checkpoint_id") or (checkpoint or {}).get("checkpoint_id")
        thread = path.split("/")[2]
        state = await read_as_caller(scope, f"/threads/{thread}/state" + (f"/{checkpoint_id}" if checkpoint_id else ""))
        current = ((state or {}).get("values") or {}).get("messages") or []
        await asyncio.to_thread(bodies.conversation_after, current, written, _deployment())
    if method == "PATCH" and isinstance(parsed, dict) and parsed.get("metadata") is not None:
        held = await read_as_caller(scope, path)
        bodies.merged_metadata_problem((held or {}).get("metadata"), parsed["metadata"],
                                       settings.max_metadata_bytes)
    if route == "/threads/{thread_id}/state/checkpoint" and isinstance(parsed, dict):
        checkpoint = parsed.get("checkpoint") or {}
        if isinstance(checkpoint, dict) and not checkpoint.get("checkpoint_id"):
            query = urlencode({"subgraphs": "true"}) if parsed.get("subgraphs") else ""
            latest = path.removesuffix("/checkpoint")
            return {**scope, "method": "GET", "path": latest, "raw_path": latest.encode(),
                    "query_string": query.encode(), "headers": _without_body(scope)}
    return scope


def _without_body(scope: Scope) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in scope.get("headers") or () if k.lower() not in (b"content-length",
                                                                                b"transfer-encoding")]


async def respond(send: Send, status: int, detail: str, headers: dict[str, Any] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    extra = [(str(k).lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
