"""The served API's authentication, ownership and request-settings handlers, and its browser guard,
called directly (the e2e tests run them inside the real server)."""

from __future__ import annotations

import asyncio
import base64
import contextvars
import hashlib
import hmac
import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from evident.settings import ConfigError, DeployedServerSettings
from evident.web import auth as auth_module
from evident.web import settings as web_settings
from evident.web.admitted import admitted_client
from evident.web.auth import check_settings, direct_client, identify, owner_filter, token_digest
from evident.web.browser import BrowserGuard
from evident.web.settings import LOOPBACK_HOSTS, ServerSettings, host_name

LOOPBACK = ("127.0.0.1", 50000)
REMOTE = ("10.1.2.3", 50000)


def write_tokens(path: Path, **users: tuple[str, list[str]]) -> Path:
    path.write_text(json.dumps({"tokens": [
        {"sha256": token_digest(token), "user": user, "groups": groups} for token, (user, groups) in users.items()
    ]}), encoding="utf-8")
    return path


def status_of(call: Any) -> int:
    with pytest.raises(Auth.exceptions.HTTPException) as err:
        call()
    return err.value.status_code


# -- identity ------------------------------------------------------------------------------------------


def test_without_authentication_only_loopback_callers_are_served_anonymously() -> None:
    open_ = ServerSettings()
    assert identify(None, LOOPBACK, open_) == {"identity": "anonymous", "groups": [], "is_authenticated": False}
    assert status_of(lambda: identify(None, REMOTE, open_)) == 403
    assert identify(None, REMOTE, ServerSettings(insecure=True))["identity"] == "anonymous"


def test_bearer_tokens_from_a_file_of_digests(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", **{"hr-token": ("hana", ["hr"]), "staff-token": ("sam", [])})
    assert "hr-token" not in tokens.read_text()
    s = ServerSettings(tokens_file=tokens)
    assert identify("Bearer hr-token", REMOTE, s) == {"identity": "hana", "groups": ["hr"], "is_authenticated": True}
    assert identify("bearer staff-token", LOOPBACK, s)["identity"] == "sam"
    for header in (None, "", "Bearer", "Basic hr-token", "Bearer wrong", "Bearer HR-TOKEN"):
        assert status_of(partial(identify, header, LOOPBACK, s)) == 401, header
    # A token file changed on disk is picked up without a restart.
    write_tokens(tokens, **{"new-token": ("nora", ["hr"])})
    assert identify("Bearer new-token", REMOTE, s)["identity"] == "nora"
    assert status_of(lambda: identify("Bearer hr-token", REMOTE, s)) == 401


def test_a_broken_tokens_file_says_nothing_to_the_caller(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.json"
    bad.write_text('[{"sha256": "short", "user": "x"}]', encoding="utf-8")
    assert status_of(lambda: identify("Bearer x", LOOPBACK, ServerSettings(tokens_file=bad))) == 503


def _hs(secret: str, **claims: Any) -> str:
    return jwt.encode({"sub": "hana", "exp": int(time.time()) + 600, **claims}, secret, algorithm="HS256")


def test_hs256_jwts_with_issuer_audience_and_expiry(tmp_path: Path) -> None:
    key = tmp_path / "secret"
    key.write_text("a-shared-secret-of-enough-length-for-hs256\n", encoding="utf-8")
    s = ServerSettings(jwt_key_file=key, jwt_algorithms=["HS256"], jwt_issuer="https://idp.example",
                       jwt_audience="evident", jwt_groups_claim="realm.roles")
    secret = "a-shared-secret-of-enough-length-for-hs256"
    good = _hs(secret, iss="https://idp.example", aud="evident", realm={"roles": ["hr", "staff"]})
    assert identify(f"Bearer {good}", REMOTE, s) == {"identity": "hana", "groups": ["hr", "staff"],
                                                     "is_authenticated": True}
    expired = _hs(secret, iss="https://idp.example", aud="evident", exp=int(time.time()) - 3600)
    wrong_aud = _hs(secret, iss="https://idp.example", aud="another-app")
    wrong_iss = _hs(secret, iss="https://evil.example", aud="evident")
    no_exp = jwt.encode({"sub": "hana", "iss": "https://idp.example", "aud": "evident"}, secret, algorithm="HS256")
    forged = _hs("another-secret-of-enough-length-for-hs256!", iss="https://idp.example", aud="evident")
    unsigned = jwt.encode({"sub": "hana", "iss": "https://idp.example", "aud": "evident",
                           "exp": int(time.time()) + 600}, None, algorithm="none")
    for token in (expired, wrong_aud, wrong_iss, no_exp, forged, unsigned):
        assert status_of(partial(identify, f"Bearer {token}", LOOPBACK, s)) == 401


def _rsa() -> tuple[Any, bytes]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def _hmac_signed(header: dict[str, Any], claims: dict[str, Any], key: bytes) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())}"


def test_rs256_jwts_from_a_public_key_or_a_jwks(tmp_path: Path) -> None:
    private, public = _rsa()
    pem = tmp_path / "public.pem"
    pem.write_bytes(public)
    claims = {"sub": "hana", "groups": "hr staff", "exp": int(time.time()) + 600}
    token = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
    assert identify(f"Bearer {token}", LOOPBACK, ServerSettings(jwt_key_file=pem))["groups"] == ["hr", "staff"]
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}), encoding="utf-8")
    s = ServerSettings(jwt_jwks_file=jwks)
    assert identify(f"Bearer {token}", LOOPBACK, s)["identity"] == "hana"
    other, _ = _rsa()
    stranger = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
    unknown_kid = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k2"})
    # The public key used as an HMAC secret: the classic algorithm confusion.
    confused = _hmac_signed({"alg": "HS256", "typ": "JWT"}, claims, public)
    for bad in (stranger, unknown_kid):
        assert status_of(partial(identify, f"Bearer {bad}", LOOPBACK, s)) == 401
    assert status_of(lambda: identify(f"Bearer {confused}", LOOPBACK, ServerSettings(jwt_key_file=pem))) == 401
    with pytest.raises(ValueError, match="not both"):
        ServerSettings(jwt_key_file=pem, jwt_algorithms=["RS256", "HS256"])


def test_server_settings_from_evident_toml_and_the_environment(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "evident.toml"
    config.write_text('top_n = 3\n[server]\ntokens_file = "tokens.json"\ncors_origins = ["https://app.example/"]\n',
                      encoding="utf-8")
    s = DeployedServerSettings.load(config)
    assert s.tokens_file == tmp_path / "tokens.json" and s.cors_origins == ["https://app.example"]
    assert s.auth_configured
    monkeypatch.setenv("EVIDENT_CORS_ORIGINS", "https://a.example, https://b.example")
    assert DeployedServerSettings.load(config).cors_origins == ["https://a.example", "https://b.example"]
    monkeypatch.setenv("EVIDENT_CORS_ORIGINS", "*")
    with pytest.raises(ConfigError, match="cors_origins"):
        DeployedServerSettings.load(config)
    # The query settings of the same file are untouched by the [server] section.
    from evident.context import EvidentContext

    assert EvidentContext.from_env(config).top_n == 3


# -- ownership and request settings ------------------------------------------------------------------


def test_what_is_created_is_owned_and_everything_else_is_filtered_by_owner() -> None:
    value: dict[str, Any] = {"metadata": {"owner": "someone-else", "topic": "x"}}
    assert owner_filter("threads", "create", "hana", value) == {"owner": "hana"}
    assert value["metadata"] == {"owner": "hana", "topic": "x"}
    run: dict[str, Any] = {"metadata": {}}
    assert owner_filter("threads", "create_run", "hana", run) == {"owner": "hana"}
    assert run["metadata"]["owner"] == "hana"
    for action in ("read", "search", "update", "delete"):
        assert owner_filter("threads", action, "hana", {}) == {"owner": "hana"}
    assert owner_filter("assistants", "search", "hana", {}) == {
        "$or": [{"owner": "hana"}, {"created_by": "system"}]}
    assert owner_filter("assistants", "update", "hana", {}) == {"owner": "hana"}
    assert owner_filter("crons", "create", "hana", {}) is False
    assert owner_filter("store", "put", "hana", {}) is False


def test_request_settings_are_checked_on_runs_and_assistants() -> None:
    check_settings("threads", "create_run", {"kwargs": {"context": {"top_n": 2}}})
    assert status_of(lambda: check_settings(
        "threads", "create_run", {"kwargs": {"context": {"base_url": "http://127.0.0.1:1"}}})) == 403
    assert status_of(lambda: check_settings("threads", "create_run", {"kwargs": {"context": {"k": 10**6}}})) == 422
    assert status_of(lambda: check_settings("assistants", "create", {"context": {"corpus": ["/"]}})) == 403
    assert status_of(lambda: check_settings(
        "assistants", "update", {"config": {"configurable": {"sources": []}}})) == 403


def test_request_settings_and_bounds_are_checked_in_aegras_shape_too() -> None:
    # Aegra hands `@auth.on` the run's request fields themselves, plus the thread id.
    aegra = partial(check_settings, "threads", "create_run")
    aegra({"assistant_id": "evident", "input": {"query": "q"}, "context": {"top_n": 2}, "config": {}, "thread_id": "t"})
    assert status_of(lambda: aegra({"input": {"query": "q"}, "context": {"base_url": "http://127.0.0.1:1"}})) == 403
    # Aegra copies `config.configurable` into `context` only after the handler ran: it is checked as sent.
    assert status_of(lambda: aegra({"input": {"query": "q"}, "config": {"configurable": {"model": "m"}}})) == 403
    assert status_of(lambda: aegra({"input": {"query": "q"}, "config": {"configurable": {"__pregel_x": 1}}})) == 403
    assert status_of(lambda: aegra({"input": {"query": "q"}, "context": {"top_n": 999}})) == 422
    assert status_of(lambda: aegra({"input": {"query": "x" * 4001}})) == 422
    assert status_of(lambda: aegra({"kwargs": {"input": {"query": "x" * 4001}}})) == 422  # LangGraph's shape


def _authenticate(monkeypatch: pytest.MonkeyPatch, settings: ServerSettings, *args: Any, **kwargs: Any) -> Any:
    monkeypatch.setattr("evident.web.auth.server_settings", lambda: settings)
    # `@auth.authenticate` registers the function unchanged: what the server calls (test_serving.py).
    return asyncio.run(auth_module.authenticate(*args, **kwargs))


def test_authenticate_takes_langgraphs_named_parameters_and_aegras_headers(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    tokens = ServerSettings(tokens_file=write_tokens(tmp_path / "t.json", good=("hana", ["hr"])))
    # LangGraph's server: `headers` as bytes and the ASGI scope, by name.
    found = _authenticate(monkeypatch, tokens, headers={b"authorization": b"Bearer good"}, scope={"client": REMOTE})
    assert found["identity"] == "hana" and found["groups"] == ["hr"]
    # Aegra: one positional dict of str headers, no scope.
    assert _authenticate(monkeypatch, tokens, {"authorization": "Bearer good"})["identity"] == "hana"
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _authenticate(monkeypatch, tokens, {"authorization": "Bearer bad"})
    assert refused.value.status_code == 401


def test_without_a_scope_the_address_is_the_one_the_gate_admitted(monkeypatch: pytest.MonkeyPatch) -> None:
    open_ = ServerSettings()
    with pytest.raises(Auth.exceptions.HTTPException) as unknown:  # no gate ran: no address, not loopback
        _authenticate(monkeypatch, open_, {})
    assert unknown.value.status_code == 403

    def as_admitted(client: tuple[str, int]) -> Any:
        admitted_client.set(client)
        return _authenticate(monkeypatch, open_, {})

    assert contextvars.copy_context().run(as_admitted, LOOPBACK)["identity"] == "anonymous"
    with pytest.raises(Auth.exceptions.HTTPException) as remote:
        contextvars.copy_context().run(as_admitted, REMOTE)
    assert remote.value.status_code == 403


# -- the browser guard ---------------------------------------------------------------------------------


def _guarded(monkeypatch: pytest.MonkeyPatch, **settings: Any) -> TestClient:
    monkeypatch.setattr(web_settings, "server_settings", lambda: ServerSettings(**settings))
    monkeypatch.setattr("evident.web.browser.server_settings", lambda: ServerSettings(**settings))
    started: list[str] = []

    async def runs(request: Request) -> JSONResponse:
        started.append(await request.body())
        # What the LangGraph dev server would add on its own.
        return JSONResponse({"started": True}, headers={"access-control-allow-origin": "*",
                                                        "access-control-allow-private-network": "true"})

    app = Starlette(routes=[Route("/runs/wait", runs, methods=["POST", "GET"]),
                            Route("/ok", lambda r: PlainTextResponse("ok"))],
                    middleware=[Middleware(BrowserGuard)])
    client = TestClient(app, base_url="http://127.0.0.1:2024")
    client.started = started  # type: ignore[attr-defined]
    return client


@pytest.mark.parametrize("content_type", ["text/plain", "application/json", "application/x-www-form-urlencoded"])
def test_a_foreign_origin_starts_nothing(monkeypatch: pytest.MonkeyPatch, content_type: str) -> None:
    client = _guarded(monkeypatch)
    response = client.post("/runs/wait", content=b'{"assistant_id": "evident"}',
                           headers={"origin": "https://evil.example", "content-type": content_type})
    assert response.status_code == 403 and "evil.example" in response.json()["detail"]
    assert client.started == []  # type: ignore[attr-defined]
    assert "access-control-allow-origin" not in response.headers
    preflight = client.options("/runs/wait", headers={"origin": "https://evil.example",
                                                      "access-control-request-method": "POST",
                                                      "access-control-request-private-network": "true"})
    assert preflight.status_code == 403 and "access-control-allow-private-network" not in preflight.headers
    no_origin = client.post("/runs/wait", content=b"{}", headers={"sec-fetch-site": "cross-site"})
    assert no_origin.status_code == 403


def test_same_origin_and_listed_origins_get_through_without_a_wildcard(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _guarded(monkeypatch, cors_origins=["https://app.example"])
    same = client.post("/runs/wait", content=b"{}", headers={"origin": "http://127.0.0.1:2024"})
    assert same.status_code == 200 and same.headers.get("access-control-allow-origin") is None
    assert "access-control-allow-private-network" not in same.headers
    listed = client.post("/runs/wait", content=b"{}", headers={"origin": "https://app.example"})
    assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == "https://app.example"
    preflight = client.options("/runs/wait", headers={"origin": "https://app.example",
                                                      "access-control-request-method": "POST",
                                                      "access-control-request-private-network": "true"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert preflight.headers["access-control-allow-private-network"] == "true"
    assert client.post("/runs/wait", content=b"{}").status_code == 200  # curl, the SDK: no Origin


@pytest.mark.parametrize("auth", [{}, {"tokens_file": Path("/nonexistent")}, {"insecure": True}],
                         ids=["loopback", "tokens", "insecure"])
def test_a_rebound_host_name_is_refused_in_every_mode(monkeypatch: pytest.MonkeyPatch, auth: dict[str, Any]) -> None:
    client = _guarded(monkeypatch, **auth)
    rebound = client.post("/runs/wait", content=b"{}",
                          headers={"host": "evil.example:2024", "origin": "http://evil.example:2024"})
    assert rebound.status_code == 403 and "host" in rebound.json()["detail"]
    assert client.started == []  # type: ignore[attr-defined]
    assert client.get("/ok", headers={"host": "localhost:2024"}).status_code == 200
    assert _guarded(monkeypatch, allowed_hosts=["evident.lan"], **auth).get(
        "/ok", headers={"host": "evident.lan:2024"}).status_code == 200


@pytest.mark.parametrize("host", ["localhost:2024@evil.test", "127.0.0.1:2024 evil.test", "localhost:99999",
                                  "localhost:", "127.0.0.1:2024/x", "::1", "[::1", "", "localhost:2024:1",
                                  "localhost\\@evil.test", "evil.test#@localhost"])
def test_host_parsing_is_strict(monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    assert host_name(host) is None or host_name(host) not in LOOPBACK_HOSTS
    client = _guarded(monkeypatch, tokens_file=Path("/nonexistent"))
    assert client.post("/runs/wait", content=b"{}", headers={"host": host}).status_code == 403
    assert client.started == []  # type: ignore[attr-defined]


def test_loopback_host_names_are_read_with_their_ports() -> None:
    assert [host_name(h) for h in ("localhost:2024", "LOCALHOST", "127.0.0.1:1", "[::1]:2024", "[::1]")] == [
        "localhost", "localhost", "127.0.0.1", "[::1]", "[::1]"]


def test_a_forwarded_request_is_not_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # A reverse proxy on the same machine connects from loopback for every caller on the network.
    open_ = ServerSettings()
    for name in ("X-Forwarded-For", "forwarded", "X-Real-IP"):
        headers = {name.encode(): b"203.0.113.9"}
        assert direct_client(LOOPBACK, headers) is None
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            _authenticate(monkeypatch, open_, headers=headers, scope={"client": LOOPBACK})
        assert refused.value.status_code == 403
        assert "reverse proxy" in str(refused.value.detail)
    assert direct_client(LOOPBACK, {b"host": b"localhost"}) == LOOPBACK
    assert _authenticate(monkeypatch, open_, headers={}, scope={"client": LOOPBACK})["identity"] == "anonymous"
