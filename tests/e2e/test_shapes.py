"""One question, three ways: `graph.invoke` in this process, `RemoteGraph` and the LangGraph SDK against a real
`langgraph dev` server (`served`, tests/e2e/conftest.py). The three answers are JSON of the same shape (the two
served ones the same JSON), the models read any of them back, and the served stream's progress
(`stream_mode="custom"`) carries counts, not text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_sync_client

from evident.context import EvidentContext
from evident.graph import graph
from evident.models import Citation
from tests.e2e.corpus import SECRET_MARKERS, Q, write_hr_corpus
from tests.e2e.dev_server import DevServer

NODES = ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """`state` without what differs from run to run: times, and the ids the answer message was given."""
    out = {k: v for k, v in state.items() if k != "timings_ms"}
    out["source_runs"] = [{k: v for k, v in r.items() if k != "latency_ms"} for r in state["source_runs"]]
    out["messages"] = [{k: v for k, v in m.items() if k != "id"} for m in state["messages"]]
    return out


def shape(value: Any) -> Any:
    """The shape of a JSON value: a dict's keys with their values' shapes, a list's items' shapes (each different
    one once), a scalar's type. A document's `metadata` is its own (each source fills other keys): a dict."""
    if isinstance(value, dict):
        return {k: "dict" if k == "metadata" else shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes: list[Any] = []
        for item in value:
            if shape(item) not in shapes:
                shapes.append(shape(item))
        return shapes
    return type(value).__name__


def test_invoke_remote_graph_and_the_sdk_return_the_same_json(served: DevServer, examples: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENT_INDEX_DIR", str(tmp_path / "indexes"))
    corpus = [str(examples), str(write_hr_corpus(tmp_path / "hr"))]
    local = graph.invoke({"query": Q}, context=EvidentContext(corpus=corpus))
    remote = RemoteGraph("evident", url=served.url).invoke({"query": Q})
    sdk = get_sync_client(url=served.url).runs.wait(None, "evident", input={"query": Q})
    assert local["status"] == "answered" and local["citations"]
    assert json.loads(json.dumps(local)) == local  # JSON as it is: nothing for json.dumps to refuse
    assert isinstance(remote, dict) and isinstance(sdk, dict)
    assert set(local) == set(remote) == set(sdk)
    assert comparable(remote) == comparable(sdk)  # one server, one answer
    assert shape(local) == shape(remote)  # this process, the same shapes: every key, every type
    for state in (local, remote, sdk):
        citation = Citation.model_validate(state["citations"][0])
        document = next(d for d in state["documents"] if d["url"] == citation.url)
        assert citation.quote.replace(" … ", "") == "".join(document["content"][s:e] for s, e in citation.spans)
        (message,) = state["messages"]
        assert message["type"] == "ai" and message["additional_kwargs"]["citations"] == state["citations"]


def test_the_served_custom_stream_reports_each_step_in_counts(served: DevServer) -> None:
    client = get_sync_client(url=served.url)
    events = [part.data for part in client.runs.stream(None, "evident", input={"query": Q}, stream_mode="custom")
              if part.event == "custom"]
    assert [(e["node"], e["event"]) for e in events] == [(n, k) for n in NODES for k in ("start", "end")]
    ends = {e["node"]: e for e in events if e["event"] == "end"}
    assert ends["retrieve"]["documents"] >= 1 and ends["align"]["verified"] >= 1
    assert ends["postprocess"]["status"] == "answered" and ends["postprocess"]["citations"] >= 1
    sent = json.dumps(events)
    assert "expense" not in sent.lower() and "http" not in sent  # no text, no document id
    for marker in SECRET_MARKERS:
        assert marker not in sent
