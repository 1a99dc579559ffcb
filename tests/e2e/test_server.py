"""The graph served by `evident serve` (`langgraph dev`): the SDK, plain HTTP, streaming, Studio's
endpoints, the project's extra routes, and permissions, all on 127.0.0.1 with no outside connection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
from langgraph_sdk import get_sync_client

from tests.e2e.corpus import SECRET_MARKERS, Q
from tests.e2e.dev_server import DevServer
from tests.support.langsmith_server import LangSmithServer
from tests.support.llm import passages_reply
from tests.support.openai_server import OpenAIServer, Reply

NODES = {"retrieve", "extract_batch", "extract", "align", "insufficient", "generate", "verify", "postprocess"}

# `served` (the server without authentication), `langsmith_api`, and `served_llm` with its scripted `model`
# come from tests/e2e/conftest.py.


def sse(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """(event, data) of a server-sent event stream."""
    event, data = "message", []
    for line in response.iter_lines():
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def check_answer(out: dict[str, Any]) -> None:
    """Answered, and every citation resolves to the text of a retrieved document at its spans."""
    assert out["status"] == "answered", out.get("error")
    assert "30 days" in out["answer"]
    docs = {d["url"]: d["content"] for d in out["documents"]}
    assert out["citations"]
    for c in out["citations"]:
        text = docs[c["url"]]
        assert c["quote"].replace(" … ", "") == "".join(text[s:e] for s, e in c["spans"])


# -- the project's routes ------------------------------------------------------------------------------


def test_health_and_version(served: DevServer) -> None:
    health = httpx.get(f"{served.url}/health", timeout=10)
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "ok" and body["graph"] == "evident" and body["mode"] == "offline"
    assert body["retriever"]["ready"] is True and body["sources"] == 2 and body["auth"] == "loopback"
    version = httpx.get(f"{served.url}/version", timeout=10).json()
    assert version["evident"] == "0.1.0" and version["packages"]["langgraph"]
    # The LangGraph server's own routes are still there beside ours.
    assert httpx.get(f"{served.url}/ok", timeout=10).status_code == 200
    assert httpx.get(f"{served.url}/docs", timeout=10).status_code == 200


# -- answering -------------------------------------------------------------------------------------------


def test_sdk_runs_wait(served: DevServer) -> None:
    client = get_sync_client(url=served.url)
    (assistant,) = client.assistants.search(graph_id="evident")
    assert assistant["assistant_id"] and assistant["graph_id"] == "evident"
    out = client.runs.wait(None, "evident", input={"query": Q})
    check_answer(out)
    assert [a["action"] for a in out["alignment"]] and out["timings_ms"]["retrieve"] >= 0
    # A request's allowed settings override the served ones for that run only.
    strict = client.runs.wait(None, "evident", input={"query": Q}, context={"threshold": 1.0, "top_n": 2})
    assert len(strict["documents"]) <= 2


def test_http_runs_wait(served: DevServer) -> None:
    response = httpx.post(f"{served.url}/runs/wait", json={"assistant_id": "evident", "input": {"query": Q}},
                          timeout=60)
    assert response.status_code == 200
    check_answer(response.json())


def test_http_runs_stream_reports_every_step(served: DevServer) -> None:
    body = {"assistant_id": "evident", "input": {"query": Q}, "stream_mode": ["updates", "values"]}
    with httpx.stream("POST", f"{served.url}/runs/stream", json=body, timeout=60) as response:
        assert response.status_code == 200
        events = list(sse(response))
    kinds = [e for e, _ in events]
    assert kinds[0] == "metadata" and "error" not in kinds
    steps = [node for e, data in events if e == "updates" for node in data]
    assert steps == ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]
    final = [data for e, data in events if e == "values"][-1]
    check_answer(final)


def test_bad_input_is_an_answer_with_status_error(served: DevServer) -> None:
    out = get_sync_client(url=served.url).runs.wait(None, "evident", input={"query": "   "})
    assert out["status"] == "error" and "empty" in out["error"]


# -- what Studio needs -------------------------------------------------------------------------------


def test_schemas_and_graph_for_studio(served: DevServer) -> None:
    client = get_sync_client(url=served.url)
    (assistant,) = client.assistants.search(graph_id="evident")
    schemas = httpx.get(f"{served.url}/assistants/{assistant['assistant_id']}/schemas", timeout=30)
    assert schemas.status_code == 200
    body = schemas.json()
    assert not body["input_schema"].get("required")  # a `query` or `messages` (tests/e2e/test_conversation.py)
    assert {"query", "principal"} <= set(body["input_schema"]["properties"])
    assert {"answer", "citations", "alignment", "source_errors"} <= set(body["state_schema"]["properties"])
    context = body["context_schema"]
    # Studio offers what a request may set, and nothing the deployment alone decides.
    assert context["title"] == "EvidentContext"
    assert {"ngram_n", "threshold", "top_n", "k"} <= set(context["properties"])
    assert not {"model", "base_url", "corpus", "sources", "mode", "index_path"} & set(context["properties"])
    # The config schema (the type of `configurable`) is the same list, with the same descriptions and bounds.
    assert body["config_schema"]["properties"] == context["properties"]
    graph = client.assistants.get_graph(assistant["assistant_id"])
    assert NODES <= {n["id"] for n in graph["nodes"]}
    assert client.assistants.get(assistant["assistant_id"])["graph_id"] == "evident"


def test_a_request_setting_means_the_same_through_configurable_context_and_locally(served: DevServer) -> None:
    from evident.graph import graph
    from evident.request_settings import check_request_settings

    client = get_sync_client(url=served.url)
    by_context = client.runs.wait(None, "evident", input={"query": Q}, context={"top_n": 1})
    by_config = client.runs.wait(None, "evident", input={"query": Q}, config={"configurable": {"top_n": 1}})
    assert len(by_context["retrieved"]) == len(by_config["retrieved"]) == 1
    assert by_context["retrieved"] == by_config["retrieved"]
    refused = httpx.post(f"{served.url}/runs/wait", timeout=60, json={
        "assistant_id": "evident", "input": {"query": Q}, "config": {"configurable": {"top_n": 51}}})
    assert refused.status_code == 422
    try:
        check_request_settings({"top_n": 51})
    except ValueError as exc:
        message = str(exc)
    assert message in refused.text
    # Locally, `configurable` has the same bound and the same words.
    local = graph.invoke({"query": Q}, config={"configurable": {"top_n": 51}})
    assert local["status"] == "error" and local["error"] == message


# -- permissions through the server ------------------------------------------------------------------


def test_a_restricted_document_stays_hidden_whatever_the_body_says(served: DevServer) -> None:
    """No authentication: everyone is anonymous, and a principal in the body changes nothing."""
    client = get_sync_client(url=served.url)
    query = "How large is the executive bonus pool for 2025?"
    for body in ({"query": query}, {"query": query, "principal": {"user": "carol", "groups": ["executives"]}}):
        out = client.runs.wait(None, "evident", input=body)
        dumped = json.dumps(out)
        for marker in SECRET_MARKERS:
            assert marker not in dumped, marker
        # Nothing tells the caller that a hidden document matched.
        assert "acl_dropped" not in out and all(run["denied"] == 0 for run in out["source_runs"])
    assert out["notes"] and "principal was ignored" in out["notes"][0]


# -- LLM mode: only the verified answer streams as a message ------------------------------------------


def test_only_the_verified_answer_streams_through_the_server(served_llm: DevServer, model: OpenAIServer) -> None:
    # The served corpus is the examples; the scripted model quotes one of its pages, and its draft adds a
    # sentence no passage supports, which `verify` removes.
    quote = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
    url = "https://policies.tessellate.example/finance/travel-and-expenses"
    invented = "Directors may submit their reports a year late."
    model.script(extract=[passages_reply((url, quote))],
                 generate=[Reply(content=f"{quote} [{url}]\n{invented} [{url}]", chunk_chars=5)])
    body = {"assistant_id": "evident", "input": {"query": Q}, "stream_mode": ["updates", "messages-tuple"]}
    with httpx.stream("POST", f"{served_llm.url}/runs/stream", json=body, timeout=60) as response:
        events = list(sse(response))
    messages = [data for e, data in events if e == "messages"]
    assert invented not in json.dumps(messages)  # no token of the draft: the generation call is `nostream`
    steps = [node for e, data in events if e == "updates" for node in data]
    batches = steps.count("extract_batch")  # as many as the retrieved pages need at the default budget
    assert batches >= 1 and len(model.of_kind("extract")) == batches
    assert steps == ["rewrite", "retrieve", *["extract_batch"] * batches,
                     "extract", "align", "generate", "verify", "postprocess"]
    post = next(data["postprocess"] for e, data in events if e == "updates" and "postprocess" in data)
    assert post["status"] == "answered" and post["citations"][0]["quote"] == quote
    assert invented not in post["answer"]
    # The only message is the verified answer, whole, as it joins the thread's `messages`.
    assert [(m["content"], meta["langgraph_node"]) for m, meta in messages] == [(post["answer"], "postprocess")]


def test_no_langsmith_traffic_when_tracing_is_off(served: DevServer, langsmith_api: LangSmithServer) -> None:
    """The server has a LangSmith key (and endpoint) in its environment but tracing is not on:
    `evident serve` keeps it from calling LangSmith at all (runs nor usage counters)."""
    out = get_sync_client(url=served.url).runs.wait(None, "evident", input={"query": Q})
    assert out["status"] == "answered"
    assert langsmith_api.requests == []
