"""Which routes the served app answers: an explicit allowlist, and 404 for every other path.

The LangGraph server registers more routes than EvidenT's page, the SDK and Studio use, and not all
of them sit behind its authentication: `langgraph dev` adds `/internal/truncate` (wipes every
thread), `/internal/debug/thread/{id}` (any thread, raw), `/deploy` (starts a subprocess), and meta
routes such as `/metrics` and `/info`. A LangGraph upgrade may add more. So the served app answers
only what is named here, whatever the server registered; `BrowserGuard` (evident/web/browser.py)
refuses the rest before any route runs.

Each allowed route says who may call it:

- `langgraph`: a LangGraph API route behind the server's auth, where `evident/web/auth.py`
  authenticates the caller and filters what they see (the gate authenticates it first as well);
- `token`: a route outside that auth (ours, or a server's meta route) that needs the same
  authentication when it is configured; the gate checks it itself;
- `public`: answers without a token: liveness (`/ok`; Aegra's `/live`, and its `/ready`, which says
  whether its database answers), the page and its static files (they hold no data: the page asks
  with the user's own token), and `/health`, which without a token says only whether the server is
  up and how to authenticate (evident/web/app.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

Access = Literal["langgraph", "token", "public"]

GET, POST, PATCH, PUT, DELETE = "GET", "POST", "PATCH", "PUT", "DELETE"


@dataclass(frozen=True)
class AllowedRoute:
    """One path template (Starlette's syntax) and the methods served on it."""

    methods: frozenset[str]
    path: str
    access: Access

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.path)


def _route(access: Access, path: str, *methods: str) -> AllowedRoute:
    return AllowedRoute(frozenset(methods), path, access)


def _api(path: str, *methods: str) -> AllowedRoute:
    return _route("langgraph", path, *methods)


# The LangGraph API as the page (evident/web/static/stream.js), `langgraph_sdk` and Studio use it:
# assistants, threads and runs. Crons and the store are refused by the auth handler and left out here.
ALLOWED: tuple[AllowedRoute, ...] = (
    _route("public", "/ok", GET),
    _route("public", "/live", GET),
    _route("public", "/ready", GET),
    _route("public", "/health", GET),
    _route("public", "/", GET),
    _route("public", "/static/{path:path}", GET),
    _route("token", "/version", GET),
    _route("token", "/info", GET),
    _route("token", "/docs", GET),
    _route("token", "/openapi.json", GET),
    # Ours (evident/web/feedback.py): the caller's own thread and run are checked through the API above.
    _route("token", "/threads/{thread_id}/runs/{run_id}/feedback", POST),
    # Ours (evident/web/recheck.py): the caller's own thread's answers re-checked against the sources now.
    _route("token", "/threads/{thread_id}/recheck", POST),
    # Ours (evident/web/mcp.py): EvidenT as an MCP tool, asked as the authenticated caller.
    _route("token", "/mcp", POST),
    _api("/assistants", POST),
    _api("/assistants/search", POST),
    _api("/assistants/count", POST),
    _api("/assistants/{assistant_id}", GET, PATCH, DELETE),
    _api("/assistants/{assistant_id}/graph", GET),
    _api("/assistants/{assistant_id}/schemas", GET),
    _api("/assistants/{assistant_id}/subgraphs", GET),
    _api("/assistants/{assistant_id}/subgraphs/{namespace}", GET),
    _api("/assistants/{assistant_id}/versions", POST),
    _api("/assistants/{assistant_id}/latest", POST),
    _api("/threads", POST),
    _api("/threads/search", POST),
    _api("/threads/count", POST),
    _api("/threads/{thread_id}", GET, PATCH, DELETE),
    _api("/threads/{thread_id}/copy", POST),
    # Read at a checkpoint and written (`update_state`) by the thread's owner: the gate checks what a
    # write may hold (evident/web/bodies.py), as for a run's input.
    _api("/threads/{thread_id}/state", GET, POST),
    _api("/threads/{thread_id}/state/checkpoint", POST),
    _api("/threads/{thread_id}/state/{checkpoint_id}", GET),
    _api("/threads/{thread_id}/history", GET, POST),
    _api("/threads/{thread_id}/stream", GET),
    _api("/threads/{thread_id}/runs", GET, POST),
    _api("/threads/{thread_id}/runs/stream", POST),
    _api("/threads/{thread_id}/runs/wait", POST),
    _api("/threads/{thread_id}/runs/{run_id}", GET, DELETE),
    _api("/threads/{thread_id}/runs/{run_id}/join", GET),
    _api("/threads/{thread_id}/runs/{run_id}/stream", GET),
    _api("/threads/{thread_id}/runs/{run_id}/cancel", POST),
    _api("/runs", POST),
    _api("/runs/stream", POST),
    _api("/runs/wait", POST),
    _api("/runs/batch", POST),
)
# Refused on purpose, besides what the server adds for development (`/internal/*`, `/deploy`) and
# `/metrics`: crons and the store (the graph uses neither); `/threads/prune` and `/runs/cancel` (bulk
# operations over many threads); `/threads/{id}/commands`, `/storage` and the v2 event-streaming
# websocket, which the page, the SDK's used calls and Studio's chat do not need.


def _compiled(path: str) -> re.Pattern[str]:
    parts = []
    for literal, name, convertor in re.findall(r"([^{]*)(?:\{(\w+)(?::(\w+))?\})?", path):
        parts.append(re.escape(literal))
        if name:
            parts.append(".*" if convertor == "path" else "[^/]+")
    return re.compile("".join(parts) + r"\Z")


_PATTERNS = tuple((route, route.pattern) for route in ALLOWED)


def allowed_route(method: str, path: str) -> AllowedRoute | None:
    """The allowlist entry serving `method` on `path`, or None. HEAD goes with GET, and OPTIONS (a
    CORS preflight, which runs nothing) with any allowed path."""
    wanted = GET if method == "HEAD" else method
    for route, pattern in _PATTERNS:
        if pattern.match(path) and (wanted in route.methods or method == "OPTIONS"):
            return route
    return None


@dataclass(frozen=True)
class ServedRoute:
    """A route of the real app: its path template and methods (empty for a mount or a websocket)."""

    path: str
    methods: frozenset[str]
    kind: str


def route_table(routes: Iterable[Any], prefix: str = "") -> Iterator[ServedRoute]:
    """Every route of a Starlette app's route list, mounts and FastAPI's included routers walked into, in
    the order they are matched."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:  # FastAPI keeps an included router whole, its prefix beside it
            context = getattr(route, "include_context", None)
            yield from route_table(included.routes, prefix + str(getattr(context, "prefix", "") or ""))
            continue
        path = prefix + str(getattr(route, "path", ""))
        inner = getattr(route, "routes", None)
        if inner:
            yield from route_table(inner, path)
            continue
        methods = frozenset(getattr(route, "methods", None) or ())
        kind = type(route).__name__
        if kind == "Mount":  # a mounted app without routes of its own (static files): anything below it
            path = path.rstrip("/") + "/{path:path}"
        yield ServedRoute(path, methods, kind)


def refused_routes(table: Iterable[ServedRoute]) -> list[ServedRoute]:
    """The routes of `table` that the allowlist does not serve (for the log, and for the tests)."""
    out = []
    for served in table:
        methods = served.methods or frozenset({GET})
        if not any(route.path == served.path and method in route.methods for route in ALLOWED for method in methods):
            out.append(served)
    return out
