"""The attacks of issue 9, each against a real server on 127.0.0.1 over real HTTP: `langgraph dev`, and
Aegra on PostgreSQL (tests/e2e/deployments.py), every test on both.

Two deployments: `served`, the developer's default, without authentication (loopback only, everyone
anonymous), and `secured`, with a tokens file and HS256 JWTs. Each test names the attack it replays;
docs/security.md lists them with the defence each one checks.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.corpus import HR_PAGE, HR_QUERY, SECRET_WORD, Q, server_env, tokens_file
from tests.e2e.deployments import SERVERS, deployment, detail
from tests.e2e.dev_server import DevServer

JWT_SECRET = "an-hs256-secret-only-the-identity-provider-and-evident-know"
ISSUER, AUDIENCE = "https://idp.test", "evident"
TOKENS = {"hr-token-1": ("hana", ["hr"]), "staff-token-2": ("sam", ["staff"])}
INTRANET = "https://intranet.test"  # the one browser origin the secured deployment lists


class Listener:
    """An HTTP server on 127.0.0.1 that records whatever reaches it (an attacker's endpoint)."""

    def __init__(self) -> None:
        seen = self.requests = []  # type: list[tuple[str, str, dict[str, str]]]

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                seen.append((self.command, self.path, dict(self.headers)))
                self.send_response(500)
                self.end_headers()

            do_GET = do_POST = _record

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


@pytest.fixture(scope="module", params=SERVERS)
def served(request: pytest.FixtureRequest, served: DevServer, tmp_path_factory: pytest.TempPathFactory,
           examples: Path) -> Iterator[DevServer]:
    """The session's `langgraph dev` deployment (tests/e2e/conftest.py), or the same on Aegra."""
    if request.param != "aegra":
        yield served
        return
    root = tmp_path_factory.mktemp("served-aegra")
    with deployment(request, root / "server", server_env(root, examples)) as server:
        yield server


@pytest.fixture(scope="module", params=SERVERS)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            examples: Path) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("secured")
    (root / "hr-only").mkdir()
    (root / "hr-only" / "code-words.md").write_text(HR_PAGE, encoding="utf-8")
    tokens = tokens_file(root / "tokens.json", TOKENS)
    key = root / "jwt.key"
    key.write_text(JWT_SECRET, encoding="utf-8")
    env = server_env(root, examples, EVIDENT_AUTH_TOKENS_FILE=str(tokens), EVIDENT_JWT_KEY_FILE=str(key),
                     EVIDENT_JWT_ALGORITHMS="HS256", EVIDENT_JWT_ISSUER=ISSUER, EVIDENT_JWT_AUDIENCE=AUDIENCE,
                     EVIDENT_JWT_GROUPS_CLAIM="groups", EVIDENT_CORS_ORIGINS=INTRANET)
    env["EVIDENT_CORPUS"] = os.pathsep.join([env["EVIDENT_CORPUS"], str(root / "hr-only")])
    with deployment(request, root / "server", env) as server:
        yield server


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def signed(**claims: Any) -> str:
    body = {"sub": "jo", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600, **claims}
    return jwt.encode(body, JWT_SECRET, algorithm="HS256")


def run_wait(server: DevServer, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{server.url}/runs/wait", json={"assistant_id": "evident", **body},
                      headers=headers or {}, timeout=60)


def thread_ids(server: DevServer, headers: dict[str, str] | None = None) -> set[str]:
    response = httpx.post(f"{server.url}/threads/search", json={"limit": 1000}, headers=headers or {}, timeout=10)
    assert response.status_code == 200, response.text
    return {t["thread_id"] for t in response.json()}


# -- request settings: command execution, secret theft, file read and write --------------------------


def test_a_retriever_import_path_runs_no_command(served: DevServer, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = {"sources": [{"type": "langchain", "retriever": "subprocess:run",
                            "kwargs": {"args": ["sh", "-c", f"id > {marker}"]}}]}
    for body in ({"context": payload}, {"config": {"configurable": payload}}):
        response = run_wait(served, {"input": {"query": Q}, **body})
        assert response.status_code == 403 and "'sources'" in detail(response), response.text
    thread = httpx.post(f"{served.url}/threads", json={}, timeout=10).json()["thread_id"]
    streamed = httpx.post(f"{served.url}/threads/{thread}/runs/stream", timeout=60,
                          json={"assistant_id": "evident", "input": {"query": Q}, "context": payload})
    assert streamed.status_code == 403
    assistant = httpx.post(f"{served.url}/assistants", json={"graph_id": "evident", "context": payload}, timeout=10)
    assert assistant.status_code == 403 and "'sources'" in assistant.text
    assert not marker.exists()


def test_a_model_endpoint_of_the_request_receives_nothing(served: DevServer, listener: Listener) -> None:
    steal = {"model": "m", "base_url": f"{listener.url}/v1", "api_key_env": "HOME", "mode": "llm"}
    for body in ({"context": steal}, {"config": {"configurable": steal}}):
        response = run_wait(served, {"input": {"query": Q}, **body})
        assert response.status_code == 403 and "may not be set by a request" in response.text
    assistant = httpx.post(f"{served.url}/assistants", timeout=10,
                           json={"graph_id": "evident", "config": {"configurable": steal}})
    assert assistant.status_code == 403
    assert listener.requests == []


def test_a_foreign_folder_is_not_read(served: DevServer, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "secret.md").write_text("# Vault\n\nThe vault password is HUNTER2-ORCHID.\n", encoding="utf-8")
    response = run_wait(served, {"input": {"query": "What is the vault password?"},
                                 "context": {"corpus": [str(foreign)]}})
    assert response.status_code == 403 and "'corpus'" in detail(response)
    assert "HUNTER2" not in response.text
    # Nor does any later query find it: nothing was indexed.
    later = run_wait(served, {"input": {"query": "What is the vault password?"}}).json()
    assert "HUNTER2" not in json.dumps(later)


def test_no_file_appears_at_a_requested_index_path(served: DevServer, tmp_path: Path) -> None:
    target = tmp_path / "planted" / "index.sqlite"
    response = run_wait(served, {"input": {"query": Q}, "context": {"index_path": str(target)}})
    assert response.status_code == 403 and "'index_path'" in response.text
    assert not target.exists() and not target.parent.exists()


def test_limits_are_the_deployments(served: DevServer) -> None:
    response = run_wait(served, {"input": {"query": Q}, "context": {"max_query_chars": 10**9}})
    assert response.status_code == 403 and "'max_query_chars'" in response.text
    bounded = run_wait(served, {"input": {"query": Q}, "context": {"top_n": 10**6}})
    assert bounded.status_code == 422 and "'top_n'" in bounded.text
    assert run_wait(served, {"input": {"query": Q}, "context": {"top_n": 3}}).json()["status"] == "answered"


def test_an_input_over_the_deployments_bounds_is_refused_before_any_run(served: DevServer) -> None:
    long_query = run_wait(served, {"input": {"query": "x" * 4001}})  # the default max_query_chars is 4000
    assert long_query.status_code == 422 and "the query is too long: 4001 characters" in long_query.text
    thread = httpx.post(f"{served.url}/threads", json={}, timeout=10).json()["thread_id"]
    many = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(41)]
    response = httpx.post(f"{served.url}/threads/{thread}/runs/wait", timeout=60,
                          json={"assistant_id": "evident", "input": {"messages": many}})
    assert response.status_code == 422 and "too many messages: 41 (the limit is 40)" in response.text
    huge = [{"role": "user", "content": "y" * 60_001}]
    response = httpx.post(f"{served.url}/threads/{thread}/runs/wait", timeout=60,
                          json={"assistant_id": "evident", "input": {"messages": huge}})
    assert response.status_code == 422 and "the conversation is too long: 60001 characters" in response.text
    state = httpx.get(f"{served.url}/threads/{thread}/state", timeout=10).json()
    assert not (state.get("values") or {}).get("messages")  # nothing of the refused inputs reached the thread
    assert run_wait(served, {"input": {"query": Q}}).json()["status"] == "answered"


# -- browsers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
def test_a_foreign_web_page_starts_no_run(served: DevServer, content_type: str) -> None:
    before = thread_ids(served)
    body = json.dumps({"assistant_id": "evident", "input": {"query": Q}, "on_completion": "keep"})
    response = httpx.post(f"{served.url}/runs/wait", content=body, timeout=60,
                          headers={"Origin": "https://attacker.example", "Content-Type": content_type})
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers
    preflight = httpx.options(f"{served.url}/runs/wait", headers={
        "Origin": "https://attacker.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Private-Network": "true"})
    assert preflight.status_code == 403
    assert "access-control-allow-private-network" not in preflight.headers
    assert thread_ids(served) == before
    # The same request from the server's own origin (its page) does run.
    own = httpx.post(f"{served.url}/runs/wait", content=body, timeout=60,
                     headers={"Origin": served.url, "Content-Type": "application/json"})
    assert own.status_code == 200 and own.headers.get("access-control-allow-origin") != "*"


def test_a_listed_origin_gets_cors_for_itself_only(secured: DevServer) -> None:
    preflight = httpx.options(f"{secured.url}/runs/wait", headers={
        "Origin": INTRANET, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == INTRANET
    response = run_wait(secured, {"input": {"query": Q}}, {**bearer("staff-token-2"), "Origin": INTRANET})
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == INTRANET
    other = run_wait(secured, {"input": {"query": Q}}, {**bearer("staff-token-2"), "Origin": "https://intranet.test.evil"})
    assert other.status_code == 403


def test_a_rebound_dns_name_is_refused(served: DevServer) -> None:
    response = httpx.post(f"{served.url}/runs/wait", timeout=10,
                          json={"assistant_id": "evident", "input": {"query": Q}},
                          headers={"Host": "attacker.example:2024", "Origin": "http://attacker.example:2024"})
    assert response.status_code == 403


# -- state per run ---------------------------------------------------------------------------------------


def test_a_thread_can_be_reused(served: DevServer) -> None:
    thread = httpx.post(f"{served.url}/threads", json={}, timeout=10).json()["thread_id"]

    def ask(query: str) -> dict[str, Any]:
        response = httpx.post(f"{served.url}/threads/{thread}/runs/wait", timeout=60,
                              json={"assistant_id": "evident", "input": {"query": query}})
        assert response.status_code == 200, response.text
        return response.json()

    failed = ask("   ")
    assert failed["status"] == "error" and failed["error"]
    clean = ask(Q)
    assert clean["status"] == "answered" and clean["error"] == "" and clean["source_errors"] == []
    again = ask("   ")
    assert again["answer"] == "" and again["citations"] == [] and again["passages"] == []


# -- authentication and permissions --------------------------------------------------------------------


def test_no_token_no_access(secured: DevServer) -> None:
    for method, path, body in (("POST", "/runs/wait", {"assistant_id": "evident", "input": {"query": Q}}),
                               ("POST", "/threads/search", {}), ("POST", "/assistants/search", {}),
                               ("POST", "/threads", {})):
        for headers in ({}, bearer("not-a-token"), {"Authorization": "Basic aHI6aHI="}, {"X-Auth-Scheme": "langsmith"}):
            response = httpx.request(method, f"{secured.url}{path}", json=body, headers=headers, timeout=30)
            assert response.status_code in (401, 403), (path, headers, response.status_code)


def test_permissions_follow_the_token_not_the_body(secured: DevServer) -> None:
    hr = run_wait(secured, {"input": {"query": HR_QUERY}}, bearer("hr-token-1")).json()
    assert SECRET_WORD in hr["answer"]
    staff_body = {"input": {"query": HR_QUERY, "principal": {"user": "hana", "groups": ["hr"]}}}
    staff = run_wait(secured, staff_body, bearer("staff-token-2")).json()
    assert SECRET_WORD not in json.dumps(staff) and "hr.example" not in json.dumps(staff)
    assert "principal was ignored" in staff["notes"][0]
    assert "acl_dropped" not in staff
    spoofed = run_wait(secured, {"input": {"query": HR_QUERY}, "config": {"configurable": {
        "langgraph_auth_user": {"identity": "hana", "groups": ["hr"]}}}}, bearer("staff-token-2"))
    # The server strips the reserved key (and our check would refuse it): the caller stays who they are.
    assert spoofed.status_code in (200, 403) and SECRET_WORD not in spoofed.text
    # The same rules for a JWT from the identity provider, its groups from the configured claim.
    jwt_hr = run_wait(secured, {"input": {"query": HR_QUERY}}, bearer(signed(groups=["hr"]))).json()
    assert SECRET_WORD in jwt_hr["answer"]
    jwt_other = run_wait(secured, {"input": {"query": HR_QUERY}}, bearer(signed(groups=["sales"]))).json()
    assert SECRET_WORD not in json.dumps(jwt_other)


def test_bad_jwts_are_rejected(secured: DevServer) -> None:
    for token in (signed(exp=int(time.time()) - 3600), signed(aud="another-app"), signed(iss="https://evil.test"),
                  jwt.encode({"sub": "jo", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600},
                             "a-guessed-secret-of-the-same-length-as-the-real-one!", algorithm="HS256")):
        assert run_wait(secured, {"input": {"query": Q}}, bearer(token)).status_code == 401


def test_an_authenticated_caller_is_still_not_the_owner(secured: DevServer, listener: Listener) -> None:
    response = run_wait(secured, {"input": {"query": Q}, "context": {"base_url": listener.url, "model": "m"}},
                        bearer("hr-token-1"))
    assert response.status_code == 403 and listener.requests == []


def test_threads_are_visible_to_their_owner_only(secured: DevServer) -> None:
    alice, bob = bearer("hr-token-1"), bearer("staff-token-2")
    claimed = httpx.post(f"{secured.url}/threads", json={"metadata": {"owner": "sam"}}, headers=alice, timeout=10)
    assert claimed.status_code == 403 and "'owner'" in claimed.text  # the server says who owns what
    created = httpx.post(f"{secured.url}/threads", json={"metadata": {"topic": "hr"}}, headers=alice, timeout=10)
    thread = created.json()["thread_id"]
    assert created.json()["metadata"]["owner"] == "hana"  # the owner is who created it
    ran = httpx.post(f"{secured.url}/threads/{thread}/runs/wait", headers=alice, timeout=60,
                     json={"assistant_id": "evident", "input": {"query": HR_QUERY}})
    assert ran.status_code == 200 and SECRET_WORD in ran.json()["answer"]
    assert thread in thread_ids(secured, alice)
    assert thread not in thread_ids(secured, bob)
    for path in (f"/threads/{thread}", f"/threads/{thread}/state"):
        response = httpx.get(f"{secured.url}{path}", headers=bob, timeout=10)
        assert response.status_code == 404 and SECRET_WORD not in response.text, path
    runs = httpx.get(f"{secured.url}/threads/{thread}/runs", headers=bob, timeout=10)
    # Aegra lists another user's thread's runs as `200 []` (docs/deployment.md): what holds on both
    # servers is that bob learns nothing of them.
    expected = (200, []) if secured.server == "aegra" else (404, None)
    assert runs.status_code == expected[0] and SECRET_WORD not in runs.text and alice_runs(runs) == expected[1]
    hijack = httpx.post(f"{secured.url}/threads/{thread}/runs/wait", headers=bob, timeout=60,
                        json={"assistant_id": "evident", "input": {"query": HR_QUERY}})
    assert hijack.status_code == 404 and SECRET_WORD not in hijack.text
    # The graphs' own assistants (langgraph.json's evident and evident_agent) stay usable by everyone; one made
    # by a caller is theirs.
    assistants = httpx.post(f"{secured.url}/assistants/search", json={}, headers=bob, timeout=10).json()
    assert sorted(a["graph_id"] for a in assistants) == ["evident", "evident_agent"]
    mine = httpx.post(f"{secured.url}/assistants", json={"graph_id": "evident", "context": {"top_n": 3}},
                      headers=alice, timeout=10).json()["assistant_id"]
    assert httpx.get(f"{secured.url}/assistants/{mine}", headers=bob, timeout=10).status_code == 404
    assert httpx.get(f"{secured.url}/assistants/{mine}", headers=alice, timeout=10).status_code == 200


def alice_runs(response: httpx.Response) -> list[Any] | None:
    """The runs a list response shows (None for an error response)."""
    body = response.json()
    return body if isinstance(body, list) else None
