"""What a served request may set (the allowlist and its bounds), enforced inside the graph for every
run the LangGraph server starts; the owner's `graph.invoke` keeps full control. And the state of a
thread: each query starts clean, and no output counts the documents the caller may not see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver

from evident.context import EvidentContext
from evident.graph import build_graph, graph
from evident.nodes.prepare import IGNORED_PRINCIPAL
from evident.request_settings import (
    REQUEST_BOUNDS,
    REQUEST_SETTINGS,
    ContextWithDefaults,
    RequestSettings,
    RequestSettingsError,
    check_request_settings,
    split_request_settings,
)
from evident.state import PER_QUERY, EvidentState

Q = "How many days do I have to submit an expense report after a trip?"
# What the LangGraph server puts in every run's config: the graph then knows a request started it.
SERVED = {"configurable": {"graph_id": "evident", "assistant_id": "00000000-0000-0000-0000-000000000000"}}


def served_config(user: dict[str, Any] | None = None) -> dict[str, Any]:
    configurable = dict(SERVED["configurable"])
    if user is not None:
        configurable["langgraph_auth_user"] = user
    return {"configurable": configurable}


# -- the allowlist -------------------------------------------------------------------------------------


def test_only_bounded_harmless_settings_are_allowed() -> None:
    assert REQUEST_SETTINGS == {"top_n", "k", "ngram_n", "threshold", "drift", "bridge", "unsupported",
                                "sentence_threshold", "max_passages"}
    assert check_request_settings({"top_n": 3, "threshold": 0.9, "unsupported": "flag"}) == {
        "top_n": 3, "threshold": 0.9, "unsupported": "flag"}
    # Forms send every field; None means "not set", and the server's own keys are its business.
    assert check_request_settings({"model": None, "thread_id": "t", "langgraph_request_id": "r"}) == {}
    # ...except the identity it sets from authentication, which a request must not try to supply.
    with pytest.raises(RequestSettingsError, match="authentication"):
        check_request_settings({"langgraph_auth_user": {"identity": "ceo", "groups": ["hr"]}})


@pytest.mark.parametrize("name, value", [
    ("sources", [{"type": "langchain", "retriever": "subprocess:run"}]), ("corpus", ["/etc"]),
    ("index_path", "/tmp/x.sqlite"), ("model", "m"), ("base_url", "http://127.0.0.1:9/v1"),
    ("api_key_env", "HOME"), ("api_key", "k"), ("max_query_chars", 10**9), ("retrieve_timeout_s", 1e9),
    ("mode", "llm"), ("glossary", {"a": "b"}), ("unknown", 1),
])
def test_deployment_settings_are_refused_by_name(name: str, value: Any) -> None:
    with pytest.raises(RequestSettingsError) as err:
        check_request_settings({"top_n": 2, name: value})
    assert err.value.setting == name and err.value.status == 403 and repr(name) in str(err.value)


@pytest.mark.parametrize("name, value", [("top_n", 51), ("k", 10_000), ("ngram_n", 0), ("threshold", 1.5),
                                         ("max_passages", 21), ("drift", "anything")])
def test_allowed_settings_are_bounded(name: str, value: Any) -> None:
    allowed, errors = split_request_settings({name: value, "top_n": 2} if name != "top_n" else {name: value})
    assert [(e.setting, e.status) for e in errors] == [(name, 422)]
    assert name not in allowed


def test_a_request_setting_is_the_owners_setting_capped() -> None:
    """Default, type, lower bound and description come from `EvidentContext`; a request only caps them."""
    for name, cap in REQUEST_BOUNDS.items():
        owner, request = EvidentContext.model_fields[name], RequestSettings.model_fields[name]
        assert request.annotation == owner.annotation and request.default == owner.default, name
        assert owner.description and request.description and request.description.startswith(owner.description)
        lower = [m for m in owner.metadata if not hasattr(m, "le")]
        assert [m for m in request.metadata if not hasattr(m, "le")] == lower, name
        caps = [m.le for m in request.metadata if hasattr(m, "le")]
        assert caps == ([cap] if cap is not None else [m.le for m in owner.metadata if hasattr(m, "le")]), name
    assert all(field.description for field in EvidentContext.model_fields.values())


def test_the_published_context_schema_is_what_a_request_may_set() -> None:
    schema = graph.get_context_jsonschema()
    assert schema["title"] == "EvidentContext" and set(schema["properties"]) == REQUEST_SETTINGS
    assert schema["properties"]["top_n"]["maximum"] == 50
    # The owner's class still has every field.
    assert {"sources", "corpus", "model", "base_url"} <= set(EvidentContext.model_fields)


# -- inside the graph: a served run cannot get past the allowlist -------------------------------------


class Recorder(BaseRetriever):
    """A public page and an HR-only page, whatever the query."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content="Expense reports are due within 30 days of the trip.",
                         metadata={"url": "kb/expenses", "title": "Expenses"}),
                Document(page_content="The 2025 secret code word is BLUEHERON.",
                         metadata={"url": "kb/secret", "title": "Secret", "acl": "group:hr"})]


def _recording_graph() -> tuple[Any, list[EvidentContext]]:
    contexts: list[EvidentContext] = []

    def factory(ctx: EvidentContext) -> BaseRetriever:
        contexts.append(ctx)
        return Recorder()

    return build_graph(retriever_factory=factory), contexts


@pytest.mark.parametrize("bad", [
    {"sources": [{"type": "langchain", "retriever": "subprocess:run", "kwargs": {"args": ["true"]}}]},
    {"corpus": ["/etc"]}, {"index_path": "/tmp/evident-should-not-exist.sqlite"},
    {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "HOME"}, {"max_query_chars": 10**9},
])
def test_a_served_run_with_a_deployment_setting_ends_before_retrieval(bad: dict[str, Any]) -> None:
    built, contexts = _recording_graph()
    out = built.invoke({"query": Q}, context=bad, config=served_config())
    assert out["status"] == "error" and "may not be set by a request" in out["error"]
    assert sorted(bad)[0] in out["error"]
    assert contexts == [] and out["documents"] == [] and out["answer"] == ""


def test_a_served_run_keeps_its_allowed_settings_over_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENT_K", "7")
    built, contexts = _recording_graph()
    out = built.invoke({"query": Q}, context={"top_n": 1}, config=served_config())
    assert out["status"] == "answered" and len(out["documents"]) == 1
    assert (contexts[0].top_n, contexts[0].k) == (1, 7)


def test_the_settings_a_served_node_reads_never_hold_a_refused_value() -> None:
    from evident.request_settings import refused_settings
    from evident.request_settings import run_settings as settings

    class Runtime:
        context = ContextWithDefaults(top_n=2, model="attacker", corpus=["/etc"])
        server_info = object()

    ctx = settings(Runtime())
    assert ctx.top_n == 2 and ctx.model is None and "/etc" not in ctx.corpus
    assert [e.setting for e in refused_settings(Runtime())] == ["corpus", "model"]


def test_the_owner_keeps_full_control(examples: Path) -> None:
    built, contexts = _recording_graph()
    out = built.invoke({"query": Q}, context={"corpus": [str(examples)], "top_n": 1})
    assert out["status"] == "answered" and contexts[0].corpus == [str(examples)]


# -- who is asking, on the server ----------------------------------------------------------------------


def test_a_served_run_ignores_the_body_principal_and_uses_the_authenticated_one() -> None:
    built, _ = _recording_graph()
    hr = {"user": "mallory", "groups": ["hr"]}
    anonymous = built.invoke({"query": "secret code word", "principal": hr}, config=served_config())
    assert "BLUEHERON" not in json.dumps(anonymous, default=str)
    assert anonymous["notes"] == [IGNORED_PRINCIPAL] and anonymous.get("principal") is None
    hr_user = {"identity": "hana", "groups": ["hr"], "is_authenticated": True}
    shown = built.invoke({"query": "secret code word"}, config=served_config(hr_user))
    assert "kb/secret" in [d["url"] for d in shown["documents"]] and shown["notes"] == []
    # Outside the server, the input's principal is the owner's to give.
    owner = built.invoke({"query": "secret code word", "principal": hr})
    assert "kb/secret" in [d["url"] for d in owner["documents"]]


# -- state per run ---------------------------------------------------------------------------------------


class FlakyFirst(BaseRetriever):
    """Fails its first search, then answers: a source that was down for one query."""

    calls: int = 0

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("the wiki is down")
        return Recorder().invoke(query)


def test_every_query_on_a_thread_starts_clean() -> None:
    saver_graph = build_graph(retriever=FlakyFirst(), checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    first = saver_graph.invoke({"query": Q}, config=thread)
    assert first["status"] in {"error", "degraded"} and first["source_errors"]
    second = saver_graph.invoke({"query": Q}, config=thread)
    assert second["status"] == "answered", second.get("error")
    assert second["source_errors"] == [] and second["model_errors"] == [] and second["error"] == ""
    assert set(second["timings_ms"]) >= {"retrieve", "postprocess"}
    # A failing query after an answered one shows no answer of the previous one.
    third = saver_graph.invoke({"query": "   "}, config=thread)
    assert third["status"] == "error" and third["answer"] == "" and third["citations"] == []
    assert third["passages"] == [] and third["alignment"] == []


def test_every_per_query_field_is_reset() -> None:
    # The rewrite step writes query, standalone_query and rewrite at every query; messages is the thread's.
    written_by_rewrite = {"query", "standalone_query", "rewrite"}
    assert set(EvidentState.__annotations__) - {"principal", "messages", *written_by_rewrite} == set(PER_QUERY)


def test_no_output_counts_hidden_documents() -> None:
    built, _ = _recording_graph()
    out = built.invoke({"query": "secret code word"})
    assert "acl_dropped" not in out
    assert all(run["denied"] == 0 for run in out["source_runs"])
    assert "BLUEHERON" not in json.dumps(out, default=str)
