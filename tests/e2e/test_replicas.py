"""Serving past one machine: two Aegra replicas (`evident serve --database … --redis …`) on one
PostgreSQL and one Redis, all started here on loopback (tests/support/postgres.py, redis_server.py).

The deployment has authentication (a tokens file: hana in `hr`, sam in `staff`), an HR page only `hr`
may read, and a model (tests/support/openai_server.py, an "echo" model that quotes what it is shown)
so that a follow-up is rewritten by the model from the thread's history. Its migrations run once, by
`--migrate-only`; both replicas start with `--no-migrate`. What each test replays:

- a conversation begun on one replica and continued on the other, with permissions on both;
- a replica killed mid-run: the run is re-run by the other, the thread holds one question and one answer;
- PostgreSQL stopped under load: requests fail with 503 (never a 500 or a cut-off body), and both
  replicas answer again once it is back, without a restart;
- a bounded load over both replicas (40 runs; `benchmarks/server.py` measures 200): no errors;
- deploy/nginx.conf (the compose file's reverse proxy) in front of both: the page, streams, refusals.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from evident.web.unavailable import DETAIL
from tests.e2e import dev_server
from tests.e2e.corpus import HR_PAGE, HR_QUERY, SECRET_WORD, Q, server_env, tokens_file
from tests.e2e.dev_server import DevServer
from tests.support import nginx
from tests.support.llm import echo_responder
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply
from tests.support.postgres import PostgresServer
from tests.support.redis_server import RedisServer

HANA, SAM = "hana-token-1", "sam-token-2"
FIRST = "How many days do I have to submit an expense report after a trip?"
FOLLOW_UP = "And what about the receipts?"
# What the model makes of the follow-up: it can only know the expense report from the thread's first turn.
STANDALONE = "Which receipts do I need for an expense report after a trip?"
SLOW = "SLOWLY"  # a question with this word keeps its first extraction call waiting (the run to kill)
RUN_TIMEOUT_S = 90.0  # a deadline for a slow CI machine, not a timing claim


def model_reply(echo: Any, slowed: list[ChatRequest]) -> Any:
    def respond(request: ChatRequest) -> Reply:
        if "The question, standing alone:" in request.text:  # the rewrite call (evident/prompts/rewrite.py)
            latest = request.text.rsplit("Latest message:", 1)[-1].split("\n", 1)[0].strip()
            return Reply(content=STANDALONE if latest == FOLLOW_UP else latest)
        reply: Reply = echo(request)
        if SLOW in request.text and request.kind == "extract" and not slowed:
            slowed.append(request)
            reply.delay_s = 60.0  # the replica running it is killed meanwhile
        return reply

    return respond


@dataclass
class Replicas:
    servers: list[DevServer]
    database: str
    redis: str
    env: dict[str, str]
    folder: Path
    model: OpenAIServer
    slowed: list[ChatRequest]

    def replace(self, index: int) -> DevServer:
        """Start replica `index` again (after it was killed), on its own port."""
        port = int(self.servers[index].url.rsplit(":", 1)[1])
        self.servers[index] = dev_server.start_aegra(self.folder / f"replica-{index + 1}", database=self.database,
                                                     redis=self.redis, migrate=False, env=self.env, port=port)
        return self.servers[index]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, examples: Path, postgres: PostgresServer,
             redis: RedisServer) -> Iterator[Replicas]:
    root = tmp_path_factory.mktemp("replicas")
    (root / "hr-only").mkdir()
    (root / "hr-only" / "code-words.md").write_text(HR_PAGE, encoding="utf-8")
    tokens = root / "tokens.json"
    tokens_file(tokens, {HANA: ("hana", ["hr"]), SAM: ("sam", ["staff"])})
    slowed: list[ChatRequest] = []
    with OpenAIServer(model_reply(echo_responder(), slowed)) as model:
        env = server_env(root, examples, EVIDENT_AUTH_TOKENS_FILE=str(tokens), EVIDENT_MODEL="test-model",
                         OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="test-key", EVIDENT_MODEL_TIMEOUT="120",
                         EVIDENT_MODEL_RETRIES="0",
                         # The load here is two users' 16 concurrent runs over the replicas: what they carry, not
                         # the per-user share (tests/e2e/test_served_surface.py tests that).
                         EVIDENT_MAX_ACTIVE_RUNS="64")
        env["EVIDENT_CORPUS"] = os.pathsep.join([env["EVIDENT_CORPUS"], str(root / "hr-only")])
        database = postgres.create_database("replicas")
        dev_server.migrate(database, root / "migrate")
        servers: list[DevServer] = []
        try:
            # One after the other on a new database: Aegra 0.11's replicas race to create the graph's assistant
            # at their first start, and the loser exits (docs/deployment.md).
            for i in (1, 2):
                servers.append(dev_server.start_aegra(root / f"replica-{i}", database=database, redis=redis.url,
                                                      migrate=False, env=env))
            yield Replicas(servers, database, redis.url, env, root, model, slowed)
        finally:
            for server in servers:
                server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_run(server: DevServer, token: str, body: dict[str, Any], thread: str | None = None,
             timeout: float = RUN_TIMEOUT_S) -> httpx.Response:
    path = f"/threads/{thread}/runs/wait" if thread else "/runs/wait"
    return httpx.post(f"{server.url}{path}", json={"assistant_id": "evident", **body}, headers=bearer(token),
                      timeout=timeout)


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def state_of(server: DevServer, token: str, thread: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/threads/{thread}/state", headers=bearer(token), timeout=10)
    assert response.status_code == 200, response.text
    return dict(response.json()["values"])


def test_a_conversation_begun_on_one_replica_continues_on_the_other(replicas: Replicas) -> None:
    one, two = replicas.servers
    thread = httpx.post(f"{one.url}/threads", json={}, headers=bearer(HANA), timeout=10).json()["thread_id"]
    first = wait_run(one, HANA, {"input": user(FIRST)}, thread)
    assert first.status_code == 200 and first.json()["status"] == "answered", first.text
    second = wait_run(two, HANA, {"input": user(FOLLOW_UP)}, thread)
    assert second.status_code == 200, second.text
    out = second.json()
    # The model saw the first turn, written by the other replica, and rewrote the follow-up from it.
    assert out["standalone_query"] == STANDALONE and out["rewrite"]["rewritten_by"] == "model"
    assert out["status"] == "answered" and out["citations"], out
    assert out["evidence"] in ("clear", "weak")
    assert out["messages"][-1]["additional_kwargs"]["evidence"] == out["evidence"]
    on_one, on_two = state_of(one, HANA, thread), state_of(two, HANA, thread)
    assert on_one == on_two
    assert [m["type"] for m in on_one["messages"]] == ["human", "ai", "human", "ai"]
    assert [m["content"] for m in on_one["messages"][::2]] == [FIRST, FOLLOW_UP]
    # Ownership and permissions hold on both: sam sees neither the thread nor the HR page.
    for server in (one, two):
        assert httpx.get(f"{server.url}/threads/{thread}", headers=bearer(SAM), timeout=10).status_code == 404
    assert SECRET_WORD in wait_run(two, HANA, {"input": {"query": HR_QUERY}}).json()["answer"]
    assert SECRET_WORD not in wait_run(one, SAM, {"input": {"query": HR_QUERY}}).text


def worker_of(replicas: Replicas, run_id: str) -> int:
    """Which replica's worker took the run (each logs the runs it picks up)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        for index, server in enumerate(replicas.servers):
            if re.search(rf"Worker picked up run.*{run_id}", re.sub(r"\x1b\[[0-9;]*m", "", server.output())):
                return index
        time.sleep(0.1)
    raise AssertionError(f"no replica picked up run {run_id}")


def test_a_replica_killed_mid_run_leaves_the_run_to_the_other(replicas: Replicas) -> None:
    one = replicas.servers[0]
    thread = httpx.post(f"{one.url}/threads", json={}, headers=bearer(HANA), timeout=10).json()["thread_id"]
    question = f"{SLOW}: how many days do I have to submit an expense report after a trip?"
    created = httpx.post(f"{one.url}/threads/{thread}/runs", headers=bearer(HANA), timeout=10,
                         json={"assistant_id": "evident", "input": user(question)})
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    victim = worker_of(replicas, run_id)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not replicas.slowed and time.monotonic() < deadline:  # the run is inside its model call
        time.sleep(0.05)
    assert replicas.slowed, "the run never reached its model call"
    os.killpg(replicas.servers[victim].process.pid, signal.SIGKILL)
    replicas.servers[victim].process.wait(timeout=10)
    survivor = replicas.servers[1 - victim]
    joined = httpx.get(f"{survivor.url}/threads/{thread}/runs/{run_id}/join", headers=bearer(HANA),
                       timeout=RUN_TIMEOUT_S)
    assert joined.status_code == 200 and joined.json()["status"] == "answered", joined.text
    run = httpx.get(f"{survivor.url}/threads/{thread}/runs/{run_id}", headers=bearer(HANA), timeout=10).json()
    assert run["status"] == "success"
    # One question, one answer: the re-run started from the thread as it was, nothing doubled or lost.
    messages = state_of(survivor, HANA, thread)["messages"]
    assert [(m["type"], m["content"] if m["type"] == "human" else "") for m in messages] == [
        ("human", question), ("ai", "")]
    assert messages[1]["content"] == joined.json()["answer"] and joined.json()["citations"]
    assert len(replicas.model.of_kind("extract")) >= 2  # the re-run asked the model again (docs/deployment.md)
    # The killed replica comes back and serves the same thread.
    back = replicas.replace(victim)
    assert state_of(back, HANA, thread)["messages"] == messages


def outcome(response: httpx.Response) -> str:
    """What a caller got: a 503 of ours, an answer, or the error body of a run the outage ended."""
    if response.status_code == 503:
        assert response.json() == {"detail": DETAIL} and response.headers["retry-after"], response.text
        return "503"
    body = response.json()  # a cut-off body would fail to parse here
    if response.status_code == 200 and "__error__" in body:
        return "200:run error"  # the run was executing when its checkpoint could not be written
    got = f"{response.status_code}:{body.get('status')}"
    return got if got == "200:answered" else f"{got} {response.text[:300]}"  # what went wrong, when it did


def answering(server: DevServer) -> None:
    """Once `server` answers a question again: after an outage, only 503s and failed runs until then."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (got := outcome(wait_run(server, HANA, {"input": {"query": Q}}))) != "200:answered":
        assert got in ("503", "200:run error") and time.monotonic() < deadline, got
        time.sleep(0.5)


def test_postgresql_lost_under_load_is_a_503_and_both_replicas_recover(replicas: Replicas,
                                                                       postgres: PostgresServer) -> None:
    thread = httpx.post(f"{replicas.servers[0].url}/threads", json={}, headers=bearer(HANA),
                        timeout=10).json()["thread_id"]
    assert wait_run(replicas.servers[0], HANA, {"input": {"query": Q}}, thread).status_code == 200
    outcomes: Counter[str] = Counter()
    stop = threading.Event()

    def load(server: DevServer) -> None:
        while not stop.is_set():
            try:
                # A run the outage caught is held until it is re-run: its lease lapses (30 s), the pool
                # waits out its back-off (about 30 s), then it runs again, all on a loaded machine.
                outcomes[outcome(wait_run(server, SAM, {"input": {"query": Q}}, timeout=3 * RUN_TIMEOUT_S))] += 1
            except httpx.HTTPError as exc:
                outcomes[type(exc).__name__] += 1

    with ThreadPoolExecutor(len(replicas.servers)) as pool:
        futures = [pool.submit(load, server) for server in replicas.servers]
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while outcomes["200:answered"] < 2 and time.monotonic() < deadline:  # under load: runs are answered
            time.sleep(0.1)
        postgres.pause()
        down = [httpx.post(f"{server.url}/threads", json={}, headers=bearer(SAM), timeout=30)
                for server in replicas.servers]
        postgres.resume()
        stop.set()
        for future in futures:
            future.result()
    assert [outcome(response) for response in down] == ["503", "503"]
    assert set(outcomes) <= {"200:answered", "200:run error", "503"} and outcomes["200:answered"] >= 2, outcomes
    # Back without a restart (Aegra's connection pool waits out its back-off first: docs/deployment.md):
    # each replica answers again, and the thread from before is whole.
    for server in replicas.servers:
        answering(server)
    assert [m["type"] for m in state_of(replicas.servers[1], HANA, thread)["messages"]] == ["ai"]


LOAD_RUNS = 40  # the test bounds the time; benchmarks/server.py measures 200


def test_a_bounded_load_over_both_replicas_has_no_errors(replicas: Replicas) -> None:
    for server in replicas.servers:  # what a test before left of an outage is not this test's load
        answering(server)

    def one(i: int) -> str:
        response = wait_run(replicas.servers[i % 2], SAM if i % 3 else HANA, {"input": {"query": Q}})
        got = f"{response.status_code}:{response.json().get('status')}"
        return got if got == "200:answered" else f"{got} {response.text[:300]}"

    with ThreadPoolExecutor(16) as pool:
        outcomes = Counter(pool.map(one, range(LOAD_RUNS)))
    assert outcomes == {"200:answered": LOAD_RUNS}


@pytest.fixture(scope="module")
def proxy(replicas: Replicas) -> Iterator[nginx.Nginx]:
    if (problem := nginx.available()) is not None:
        pytest.fail(problem)
    upstreams = [server.url.removeprefix("http://") for server in replicas.servers]
    with nginx.Nginx(upstreams, dev_server.free_port()) as running:
        yield running


def stream_events(url: str, token: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    event = ""
    with httpx.stream("POST", url, json={"assistant_id": "evident", **body}, headers=bearer(token),
                      timeout=RUN_TIMEOUT_S) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                events.append((event, json.loads(line.removeprefix("data:"))))
    return events


def test_the_compose_files_proxy_serves_the_page_streams_and_refuses_as_a_replica_does(
        replicas: Replicas, proxy: nginx.Nginx) -> None:
    page = httpx.get(f"{proxy.url}/", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert httpx.get(f"{proxy.url}/ok", timeout=10).status_code == 200
    refused = httpx.post(f"{proxy.url}/threads", json={}, timeout=10)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{proxy.url}/internal/truncate", headers=bearer(HANA), timeout=10).status_code == 404
    # nginx refuses an oversize body itself (client_max_body_size), before any replica reads it.
    huge = httpx.post(f"{proxy.url}/runs/wait", content=b"x" * (2 << 20), timeout=30,
                      headers={**bearer(HANA), "content-type": "application/json"})
    assert huge.status_code == 413
    thread = httpx.post(f"{proxy.url}/threads", json={}, headers=bearer(HANA), timeout=10).json()["thread_id"]
    events = stream_events(f"{proxy.url}/threads/{thread}/runs/stream", HANA,
                           {"input": user(FIRST), "stream_mode": ["updates"]})
    nodes = [next(iter(data)) for kind, data in events if kind == "updates" and isinstance(data, dict) and data]
    assert events[0][0] == "metadata" and nodes[-1] == "postprocess", events
    assert {"rewrite", "retrieve", "extract", "align", "generate"} <= set(nodes)
    # The thread the proxy's replica wrote is the same on each replica behind it.
    assert state_of(replicas.servers[0], HANA, thread) == state_of(replicas.servers[1], HANA, thread)
