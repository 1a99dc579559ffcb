"""Tracing switched on the way a deployment does it, by environment only: `LANGSMITH_TRACING=true`
and a key. The served graph then sends every node's run, with its summary, to LangSmith (here a
stand-in on 127.0.0.1), and never a document the caller may not see."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from playwright.sync_api import expect

from tests.e2e import dev_server
from tests.e2e.chromium import Watched, ask
from tests.e2e.corpus import SECRET_MARKERS, server_env
from tests.e2e.dev_server import DevServer
from tests.support.langsmith_server import LangSmithServer, metadata

PATH = ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]
WAIT_S = 60.0  # a ceiling for the server's background flush, not a timing claim


@pytest.fixture(scope="module")
def langsmith_api() -> Iterator[LangSmithServer]:
    with LangSmithServer() as api:
        yield api


@pytest.fixture(scope="module")
def traced_server(tmp_path_factory: pytest.TempPathFactory, examples: Path,
                  langsmith_api: LangSmithServer) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("traced")
    env = server_env(root, examples, LANGSMITH_TRACING="true", LANGSMITH_API_KEY="test-key",
                     LANGSMITH_ENDPOINT=langsmith_api.url, LANGSMITH_PROJECT="evident-e2e",
                     LANGSMITH_DISABLE_RUN_COMPRESSION="true")
    with dev_server.running(root / "server", env=env) as server:
        yield server


def wait_for_trace(api: LangSmithServer, root_id: str) -> dict[str, dict[str, Any]]:
    """The finished node runs under the root run of `root_id`, once every node of `PATH` and the root have
    arrived (the tracer sends its records in batches, so the last node's run can come before an earlier one's)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        runs = [r for r in api.runs.copy().values() if r.get("trace_id") == root_id or r.get("id") == root_id]
        found = {r.get("name"): r for r in runs if r.get("end_time")}
        if set(PATH) <= set(found) and root_id in {r["id"] for r in runs if r.get("end_time")}:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no complete trace for {root_id} after {WAIT_S:.0f} s: {sorted(found)}")
        time.sleep(0.1)


def test_served_runs_are_traced_by_environment_with_summaries_and_no_hidden_document(
    traced_server: DevServer, langsmith_api: LangSmithServer
) -> None:
    client = get_sync_client(url=traced_server.url)
    query = "How large is the executive bonus pool for 2025 and when is the staff bonus paid?"
    run = client.runs.create(None, "evident", input={"query": query, "principal": {"user": "bob", "groups": ["staff"]}})
    output = client.runs.join(run["thread_id"], run["run_id"])
    # The server traces its run under the same id as the run it reports.
    runs = wait_for_trace(langsmith_api, run["run_id"])
    for name in PATH:
        assert name in runs, name
        assert metadata(runs[name])["langgraph_node"] == name
    retrieve = metadata(runs["retrieve"])
    # Permissions are part of the embedded index's search: the hidden page never comes back, so there is
    # nothing to drop afterwards and no count of it anywhere, the trace included.
    assert "acl_dropped" not in retrieve and "denied_by_source" not in retrieve
    assert "denied" not in retrieve["sources"][0]
    assert "acl_dropped" not in output and all(r["denied"] == 0 for r in output["source_runs"])
    align = metadata(runs["align"])
    assert align["passages"] == sum(align[a] for a in ("kept", "corrected", "truncated", "relinked", "dropped"))
    assert all("overlap" in d and "spans" in d for d in align["decisions"])
    assert metadata(runs["postprocess"])["status"] in {"answered", "insufficient"}
    # A node's run records what it read and wrote by id: no document's or passage's text, a few kB.
    documents = [d["content"] for d in output["documents"]]
    for name in PATH:
        recorded = json.dumps([runs[name].get("inputs"), runs[name].get("outputs")])
        assert len(recorded) < 20_000 and not any(text in recorded for text in documents), name
        assert '"content":' not in recorded and '"quote":' not in recorded, name
    assert [d["passage_id"] for d in runs["align"]["outputs"]["alignment"]] == [
        d["passage_id"] for d in output["alignment"]]

    sent = langsmith_api.sent_text()
    for marker in SECRET_MARKERS:
        assert marker not in sent, marker
    # Runs, and the LangGraph server's usage counters (sent whenever it has a LangSmith key).
    assert {path.split("?")[0] for _, path in langsmith_api.requests} <= {
        "/info", "/runs/multipart", "/runs/batch", "/v1/metadata/submit"}


def test_feedback_on_a_traced_run_goes_to_langsmith_on_that_run(traced_server: DevServer,
                                                                langsmith_api: LangSmithServer) -> None:
    """With LangSmith configured, an answer's feedback is LangSmith feedback on the run's own trace."""
    client = get_sync_client(url=traced_server.url)
    thread_id = client.threads.create()["thread_id"]
    query = "How many days do I have to submit an expense report?"
    run = client.runs.create(thread_id, "evident", input={"query": query})
    client.runs.join(thread_id, run["run_id"])
    wait_for_trace(langsmith_api, run["run_id"])
    response = httpx.post(f"{traced_server.url}/threads/{thread_id}/runs/{run['run_id']}/feedback",
                          json={"score": 0, "comment": "missed the receipts rule"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["stored"] == "langsmith"
    (sent,) = [f for f in langsmith_api.feedback if f.get("run_id") == run["run_id"]]
    assert sent["key"] == "user_score" and sent["score"] == 0 and sent["comment"] == "missed the receipts rule"
    assert response.json()["feedback_id"] == sent["id"]
    # Not kept on the thread as well: LangSmith holds it, next to the trace.
    assert not [k for k in client.threads.get(thread_id)["metadata"] if k.startswith("feedback:")]
    # A run of another thread is not this thread's: refused, and nothing is sent.
    other = client.threads.create()["thread_id"]
    refused = httpx.post(f"{traced_server.url}/threads/{other}/runs/{run['run_id']}/feedback", json={"score": 1},
                         timeout=30)
    assert refused.status_code == 404
    assert len([f for f in langsmith_api.feedback if f.get("run_id") == run["run_id"]]) == 1


def test_the_pages_feedback_reaches_langsmith_on_the_run_it_streamed(traced_server: DevServer,
                                                                      langsmith_api: LangSmithServer,
                                                                      desktop: Watched) -> None:
    page = desktop.page
    streamed: list[str] = []
    page.on("response", lambda r: streamed.append(r.url) if r.url.endswith("/feedback") else None)
    page.goto(f"{traced_server.url}/")
    ask(page, "How many days do I have to submit an expense report after a trip?")
    actions = page.locator("#answer-actions")
    actions.get_by_role("button", name="Helpful", exact=True).click()
    actions.get_by_role("button", name="Send feedback").click()
    expect(actions.locator(".action-status")).to_contain_text("sent to LangSmith")
    run_id = streamed[0].split("/runs/")[1].split("/")[0]
    (sent,) = [f for f in langsmith_api.feedback if f.get("run_id") == run_id]
    assert sent["score"] == 1 and sent["key"] == "user_score"
    assert desktop.errors == [] and desktop.console == []
