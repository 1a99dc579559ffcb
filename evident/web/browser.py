"""What a web browser may do with the server: the outermost middleware of the whole served app.

A browser runs other sites' scripts next to a developer's local server. Those scripts can send a
"simple" cross-origin POST (`text/plain`, no preflight) and the browser delivers it, whatever the
CORS answer; so refusing to *share* a response is not enough, the request itself must be refused.

- A request whose `Origin` is neither the server's own (the `Host` it was sent to) nor one of the
  configured `cors_origins` gets 403 before any route runs: no run starts, whatever its content type.
  So does a state-changing request that a browser marks cross-site (`Sec-Fetch-Site`) with no Origin.
- The `Host` header must be a loopback name or an `allowed_hosts` entry, in every mode (with
  authentication too): a web page that rebinds its own DNS name to 127.0.0.1 is same-origin with
  itself, and this is what stops it. The header is parsed strictly (`name[:port]`), so
  `localhost:2024@evil.test` names no host and is refused. Starlette's `TrustedHostMiddleware` is
  not that check: it accepts a port out of range (`localhost:99999`), a `*` entry turns it off, and
  its refusal is a plain-text 400 rather than this middleware's JSON 403.
- CORS headers are given to the configured origins only (never `*`), and private-network access
  (`Access-Control-Allow-Private-Network`) only to them; the LangGraph dev server's own wildcard
  answers are removed on the way out.

The LangGraph server puts the `http.app`'s middleware before its own, so this wraps every route:
its API, Studio's endpoints and ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evident.settings import ConfigError, ServerSettings
from evident.web.settings import host_allowed, server_settings

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
EXPOSED = ["x-pagination-total", "x-pagination-next", "content-location"]


def header(scope: Scope, name: bytes) -> str | None:
    """The value of header `name` (lower case) of an ASGI scope, or None."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def same_origin(origin: str, host: str | None) -> bool:
    """Whether `origin` names the host the request was sent to (scheme aside: TLS may end at a proxy)."""
    if not host:
        return False
    parts = urlsplit(origin)
    return bool(parts.scheme in ("http", "https") and parts.netloc) and parts.netloc.lower() == host.lower()


def refusal(scope: Scope, settings: ServerSettings) -> str | None:
    """Why this request is refused, or None."""
    host = header(scope, b"host")
    if not host_allowed(settings, host or ""):
        return f"host {host!r} is not served: only loopback names and allowed_hosts are"
    origin = header(scope, b"origin")
    if origin is not None:
        if origin.rstrip("/") in settings.cors_origins or same_origin(origin, host):
            return None
        return f"requests from origin {origin!r} are not allowed (cors_origins)"
    site = (header(scope, b"sec-fetch-site") or "").lower()
    if site in ("cross-site", "same-site") and scope.get("method", "GET") not in SAFE_METHODS:
        return "cross-site requests are not allowed"
    return None


def _scrubbed(headers: Iterable[tuple[bytes, bytes]], allow_private_network: bool) -> list[tuple[bytes, bytes]]:
    out = []
    for key, value in headers:
        name = key.lower()
        if name == b"access-control-allow-origin" and value.strip() == b"*":
            continue
        if name == b"access-control-allow-private-network" and not allow_private_network:
            continue
        out.append((key, value))
    return out


class BrowserGuard:
    """ASGI middleware: refuse foreign origins and rebound host names; CORS for the allowlist only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._cors: dict[tuple[str, ...], ASGIApp] = {}

    def _with_cors(self, settings: ServerSettings) -> ASGIApp:
        key = tuple(settings.cors_origins)
        found = self._cors.get(key)
        if found is None:
            found = self._cors[key] = CORSMiddleware(
                self.app, allow_origins=list(key), allow_methods=["*"], allow_headers=["*"],
                allow_credentials=False, allow_private_network=True, expose_headers=EXPOSED)
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            settings = server_settings()
        except ConfigError as exc:  # fail closed: a server whose own settings are broken serves nothing
            await self._refuse(scope, send, 503, str(exc))
            return
        problem = refusal(scope, settings)
        if problem is not None:
            await self._refuse(scope, send, 403, problem)
            return
        origin = header(scope, b"origin")
        private_ok = origin is not None and origin.rstrip("/") in settings.cors_origins

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": _scrubbed(message.get("headers") or [], private_ok)}
            await send(message)

        await self._with_cors(settings)(scope, receive, guarded_send)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, status: int, detail: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
            return
        body = json.dumps({"detail": detail}).encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
