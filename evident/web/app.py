"""Routes served beside the LangGraph API (`http.app` in langgraph.json): the answer page at `/`
(evident/web/page.py, with its Content-Security-Policy), health, version, liveness, feedback on an
answer (evident/web/feedback.py: only on the caller's own runs), and EvidenT as an MCP tool at `/mcp`
(evident/web/mcp.py).

The server that hosts the graph adds its API to this app: `langgraph dev`, `langgraph up` and a
LangGraph deployment (which accept any Starlette app) and Aegra (which requires a FastAPI app, and
adds its own routes and middleware to this very object). This app's middleware, `BrowserGuard`
(evident/web/browser.py), `RequestGate` (evident/web/gate.py) and `HeldWhileWaiting`
(evident/web/unavailable.py), wraps the whole server in both: `GuardedApp` keeps them outermost
whatever middleware the host adds after them.

Endpoints are plain functions: Starlette runs them in its thread pool, which matters because reading
settings touches files and the LangGraph dev server refuses blocking calls on its event loop.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

from fastapi import FastAPI
from langgraph_sdk import Auth
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

import evident
from evident.connectors.background import BACKGROUND, embedded_indexes
from evident.connectors.retrievers import default_retriever
from evident.context import EvidentContext
from evident.embeddings import resolve_embeddings
from evident.settings import ConfigError
from evident.web.auth import identify
from evident.web.browser import BrowserGuard
from evident.web.feedback import give_feedback
from evident.web.gate import RequestGate
from evident.web.mcp import PATH as MCP_PATH
from evident.web.mcp import endpoint as mcp_endpoint
from evident.web.page import routes as page_routes
from evident.web.recheck import recheck_thread
from evident.web.settings import server_settings
from evident.web.unavailable import HeldWhileWaiting, unavailable_handlers

log = logging.getLogger(__name__)

GRAPH_ID = "evident"
SEE_LOG = "the server's settings or corpus have a problem: its log says which"
_PACKAGES = ("langgraph", "langgraph-api", "langchain-core", "langchain-openai", "langsmith")


def _warm_up() -> dict[str, Any]:
    """Open (or build) the configured retriever once, before the first query needs it.

    The first query would otherwise build the embedded index itself, inside a request, and the
    dev server would refuse the file system calls of the async retrieve path on its event loop.
    """
    started = time.perf_counter()
    try:
        ctx = EvidentContext.from_env()
        retriever = default_retriever(ctx)
    except Exception as exc:  # the server still starts: /health says what is wrong
        log.warning("evident: the retriever is not ready: %s", exc)
        return {"ready": False, "error": str(exc)}
    _embed_in_background(ctx, retriever)
    return {"ready": True, "warm_up_ms": round((time.perf_counter() - started) * 1000, 1)}


def _embed_in_background(ctx: EvidentContext, retriever: Any) -> None:
    """Hand every index of the retriever that lacks vectors of the configured model to the background
    embedding (evident/connectors/background.py), so the server answers at once and gains meaning as it goes.
    A graph given its own embeddings (`build_graph(embeddings=...)`) has its indexes handed over by its
    first query instead."""
    if not ctx.embeddings_background:
        return
    scorer = resolve_embeddings(ctx).scorer
    if scorer is None or ctx.semantic_weight <= 0:
        return
    for name, index in embedded_indexes(retriever):
        try:
            missing, total = index.missing_vectors(scorer.model_id)
        except Exception as exc:  # its own searches report it; the server starts
            log.warning("evident: cannot tell how far source %s is embedded: %s", name, exc)
            continue
        if missing:
            log.info("evident: source %s lacks the vectors of %d of %d documents: embedding them in the "
                     "background; until then it ranks them by words", name, missing, total)  # fmt: skip
            BACKGROUND.embed(name, index, scorer)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.retriever = await asyncio.to_thread(_warm_up)
    try:
        async with mcp_endpoint.running():
            yield
    finally:
        # Ends the embedding before its next step; what it committed stays for the next start.
        await asyncio.to_thread(BACKGROUND.stop)


def ok(request: Request) -> JSONResponse:
    """Liveness: the process answers. `langgraph dev` serves its own `/ok` first; Aegra has none."""
    return JSONResponse({"ok": True})


def health(request: Request) -> JSONResponse:
    """200 when the settings are valid and the retriever opened; 503 with the reason otherwise.

    It answers without a token (the page asks it how to authenticate), but with authentication
    configured a caller without a valid token learns only `status` and `auth`."""
    retriever: dict[str, Any] = getattr(request.app.state, "retriever", None) or {"ready": None}
    try:
        ctx = EvidentContext.from_env()
    except ConfigError as exc:
        return _health_response(request, {"status": "error", "graph": GRAPH_ID, "error": str(exc)})
    body: dict[str, Any] = {
        "status": "ok" if retriever.get("ready") is not False else "error",
        "graph": GRAPH_ID,
        "mode": ctx.resolved_mode,
        "model": ctx.model if ctx.resolved_mode == "llm" else None,
        "sources": len(ctx.sources) or len(ctx.corpus_paths()),
        "retriever": retriever,
        "embedding": BACKGROUND.status(),
        "auth": _auth_mode(),
    }
    return _health_response(request, body)


def _health_response(request: Request, body: dict[str, Any]) -> JSONResponse:
    status = 200 if body["status"] == "ok" else 503
    if not _may_see_details(request):
        body = {"status": body["status"], "auth": _auth_mode()}
    elif _auth_mode() not in ("loopback", "insecure"):
        # A user is not the operator: why the index cannot open names the deployment's files, and may
        # name a page the user may not see (a URL claimed by two files). The server log has it.
        body = {**body, "error": SEE_LOG} if "error" in body else body
        if isinstance(body.get("retriever"), dict) and "error" in body["retriever"]:
            body = {**body, "retriever": {**body["retriever"], "error": SEE_LOG}}
        if "embedding" in body:
            body = {**body, "embedding": BACKGROUND.status(detail=False)}
    return JSONResponse(body, status_code=status)


def _may_see_details(request: Request) -> bool:
    try:
        settings = server_settings()
    except ConfigError:
        return False
    if not settings.auth_configured:
        return True  # the loopback (or --insecure) mode: every caller is the anonymous one
    try:
        identify(request.headers.get("authorization"), request.scope.get("client"), settings)
    except Auth.exceptions.HTTPException:
        return False
    return True


def _auth_mode() -> str:
    try:
        settings = server_settings()
    except ConfigError:
        return "invalid"
    if settings.auth_configured:
        return "+".join(name for name, on in (("tokens", settings.tokens_file is not None),
                                              ("jwt", settings.jwt_configured)) if on)
    return "insecure" if settings.insecure else "loopback"


def _version_of(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def version(request: Request) -> JSONResponse:
    return JSONResponse({
        "evident": evident.__version__,
        "python": platform.python_version(),
        "packages": {name: _version_of(name) for name in _PACKAGES},
    })


try:  # read now, at import, rather than on the event loop of the first request
    server_settings()
except ConfigError as exc:
    log.error("evident: %s: every request will be refused until it is fixed", exc)

FEEDBACK = Route("/threads/{thread_id}/runs/{run_id}/feedback", give_feedback, methods=["POST"])
MCP = Route(MCP_PATH, mcp_endpoint, methods=["POST"])  # evident/web/mcp.py: EvidenT as an MCP tool
RECHECK = Route("/threads/{thread_id}/recheck", recheck_thread, methods=["POST"])  # evident/web/recheck.py
GUARDS = (BrowserGuard, RequestGate, HeldWhileWaiting)


def _guard(middleware: Middleware) -> bool:
    factory: object = middleware.cls
    return factory in GUARDS


class GuardedApp(FastAPI):
    """A FastAPI app whose own guards stay the outermost middleware.

    A host that adds middleware to this app puts it outside ours (Starlette's `add_middleware`
    inserts at the front): Aegra adds a CORS middleware that answers preflights itself, and a
    middleware that rewrites `text/plain` bodies to JSON. The browser and route checks must see
    every request before either does, as they do under `langgraph dev`."""

    def build_middleware_stack(self) -> ASGIApp:
        ours = [m for m in self.user_middleware if _guard(m)]
        self.user_middleware = [*ours, *(m for m in self.user_middleware if not _guard(m))]
        return super().build_middleware_stack()


# FastAPI's own /docs and /openapi.json stay: under `langgraph dev` the server's routes of those names
# come first, under Aegra these describe its whole API. Its other documentation routes are not served.
app = GuardedApp(title="EvidenT", version=evident.__version__, lifespan=lifespan, redoc_url=None,
                 swagger_ui_oauth2_redirect_url=None, exception_handlers=unavailable_handlers(),
                 routes=[*page_routes, Route("/ok", ok), Route("/health", health), Route("/version", version),
                         FEEDBACK, MCP, RECHECK],
                 middleware=[Middleware(guard) for guard in GUARDS])
