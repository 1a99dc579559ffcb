"""The answer page: `/` and its assets under `/static/`, served by the same process as the graph.

The page is static (evident/web/static/): its script talks to the graph through the LangGraph API
the server already exposes (`POST /runs/stream`), with the caller's own token, so it sees exactly
what that caller may see and nothing else. Nothing here reads the graph's state.

Every response carries a strict Content-Security-Policy: scripts, styles, images and connections
from this server only, no inline script or style, no plugins, no framing, and Trusted Types
required, so the browser itself refuses any assignment of an HTML string to the DOM. The page
builds its DOM with `textContent`, so document text, titles, URLs and model output stay text.
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).resolve().parent / "static"

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
])

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


class _StaticFiles(StaticFiles):
    """The page's assets, with the page's security headers (a script is a document too)."""

    def file_response(self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope,
                      status_code: int = 200) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(SECURITY_HEADERS)
        return response


def answer_page(request: Request) -> Response:
    """The page itself; read per request (a plain function: Starlette runs it in its thread pool)."""
    body = (STATIC / "index.html").read_bytes()
    return Response(body, media_type="text/html; charset=utf-8",
                    headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"})


routes = [
    Route("/", answer_page, methods=["GET"]),
    Mount("/static", app=_StaticFiles(directory=STATIC), name="static"),
]
