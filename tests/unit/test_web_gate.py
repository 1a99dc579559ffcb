"""The request gate (evident/web/gate.py) and the route allowlist (evident/web/routes.py) on a small
Starlette app, without a LangGraph server: the end-to-end replays are in tests/e2e/test_served_surface.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from evident.web import gate
from evident.web.auth import token_digest
from evident.web.routes import ALLOWED, allowed_route, refused_routes, route_table
from evident.web.settings import ServerSettings


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"bytes": len(body), "json": json.loads(body) if body else None})


def _app() -> Starlette:
    return Starlette(routes=[
        Route("/runs/wait", echo, methods=["POST"]),
        Route("/threads/{thread_id}/state", echo, methods=["GET", "POST", "PUT"]),
        Route("/internal/truncate", echo, methods=["POST"]),
        Route("/version", echo, methods=["GET"]),
        Route("/ok", echo, methods=["GET"]),
    ], middleware=[Middleware(gate.RequestGate)])


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[TestClient]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps([{"sha256": token_digest("good"), "user": "u"}]), encoding="utf-8")
    settings = ServerSettings(tokens_file=tokens, max_body_bytes=4096)
    monkeypatch.setattr(gate, "server_settings", lambda: settings)
    with TestClient(_app(), base_url="http://127.0.0.1:2024", client=("127.0.0.1", 5000)) as found:
        yield found


GOOD = {"Authorization": "Bearer good"}


def test_a_route_the_allowlist_does_not_name_is_404_whoever_asks(client: TestClient) -> None:
    for headers in ({}, GOOD):
        assert client.post("/internal/truncate", json={}, headers=headers).status_code == 404
        # An allowed path with a method the allowlist does not serve on it.
        assert client.put("/threads/t1/state", json={}, headers=headers).status_code == 404
    assert client.get("/threads/t1/state", headers=GOOD).json() == {"bytes": 0, "json": None}
    assert client.post("/runs/wait", json={"a": 1}, headers=GOOD).json() == {"bytes": 7, "json": {"a": 1}}


def test_api_routes_are_authenticated_at_the_gate_with_their_status_and_challenge(client: TestClient) -> None:
    # Whichever server hosts the app: Aegra would answer its handler's refusals with a bare 401.
    for headers in ({}, {"Authorization": "Bearer bad"}, {"Authorization": "Basic dTpw"}):
        refused = client.post("/runs/wait", json={}, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer", headers
    assert client.post("/runs/wait", json={}, headers=GOOD).status_code == 200


def test_allowed_routes_match_whole_paths_only() -> None:
    assert allowed_route("GET", "/threads/abc") is not None
    assert allowed_route("HEAD", "/threads/abc") is not None
    assert allowed_route("OPTIONS", "/runs/wait") is not None
    for method, path in (("GET", "/threads/abc/"), ("GET", "/threads/a/b"), ("POST", "/runs/wait/x"),
                         ("GET", "/okx"), ("GET", "//ok"), ("POST", "/threads/prune"), ("OPTIONS", "/metrics"),
                         ("GET", "/internal/debug/thread/abc"), ("PUT", "/threads/abc/state")):
        assert allowed_route(method, path) is None, (method, path)
    assert allowed_route("GET", "/static/app.js") is not None and allowed_route("GET", "/static/a/b.css")


def test_routes_outside_langgraphs_auth_need_a_token(client: TestClient) -> None:
    assert client.get("/version").status_code == 401
    assert client.get("/version", headers={"Authorization": "Bearer bad"}).status_code == 401
    assert client.get("/version", headers={"Authorization": "Bearer good"}).status_code == 200
    assert client.get("/ok").status_code == 200  # liveness stays public


def test_a_body_over_the_bound_is_refused_whole(client: TestClient) -> None:
    declared = client.post("/runs/wait", content=b"x" * 5000, headers={"content-type": "application/json", **GOOD})
    assert declared.status_code == 413 and "5000 bytes" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:
        yield from (b"y" * 1000 for _ in range(5))

    chunked = client.post("/runs/wait", content=chunks(), headers=GOOD)
    assert chunked.status_code == 413 and "4096" in chunked.json()["detail"]
    under = client.post("/runs/wait", content=json.dumps({"t": "z" * 3000}).encode(), headers=GOOD)
    assert under.status_code == 200 and under.json()["bytes"] == 3009
    assert client.post("/runs/wait", content=b"{}", headers={"content-length": "abc", **GOOD}).status_code == 400


def test_the_route_table_walks_into_mounts() -> None:
    app = Starlette(routes=[Route("/ok", echo), Mount("", routes=[Route("/deploy", echo, methods=["POST"])]),
                            Mount("/static", app=echo)])
    table = list(route_table(app.routes))
    assert [(r.path, sorted(r.methods)) for r in table] == [
        ("/ok", ["GET", "HEAD"]), ("/deploy", ["POST"]), ("/static/{path:path}", [])]
    assert [r.path for r in refused_routes(table)] == ["/deploy"]


def test_every_allowed_route_names_its_access() -> None:
    kinds: dict[str, Any] = {}
    for route in ALLOWED:
        kinds.setdefault(route.access, []).append(route.path)
        assert route.methods and route.path.startswith("/")
    assert sorted(kinds["public"]) == ["/", "/health", "/live", "/ok", "/ready", "/static/{path:path}"]
    assert sorted(kinds["token"]) == ["/docs", "/info", "/mcp", "/openapi.json", "/threads/{thread_id}/recheck",
                                      "/threads/{thread_id}/runs/{run_id}/feedback", "/version"]


def test_without_authentication_a_proxied_request_is_not_from_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "server_settings", lambda: ServerSettings())
    with TestClient(_app(), base_url="http://127.0.0.1:2024", client=("127.0.0.1", 5000)) as local:
        assert local.post("/runs/wait", json={}).status_code == 200
        proxied = local.post("/runs/wait", json={}, headers={"X-Forwarded-For": "203.0.113.9"})
        assert proxied.status_code == 403 and "reverse proxy" in proxied.text
