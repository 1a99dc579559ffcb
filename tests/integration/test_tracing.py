"""LangSmith traces of a query: one run per node, each with its summary; nothing the caller may not see.

The real LangSmith client sends its runs to a stand-in LangSmith API on 127.0.0.1
(tests/support/langsmith_server.py), so these tests check what would really leave the process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import langsmith
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tracers.langchain import wait_for_all_tracers
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

from evident.connectors.federated import FederatedRetriever
from evident.connectors.source import Source
from evident.context import EvidentContext
from evident.graph import build_graph, instrument
from tests.support.langsmith_server import LangSmithServer, metadata
from tests.support.llm import (
    BOOKING,
    EXPENSES,
    REMOTE,
    TRAVEL,
    ListRetriever,
    documents,
    echo_model,
    echo_responder,
    fake_context,
    llm_context,
    passages_reply,
    retriever,
    server,
)
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sources import UNMAPPED_REASON, Unmapped

__all__ = ["server"]

SECRET = "The executive bonus pool for 2025 is 4.2 million USD."
SECRET_MARKERS = ("4.2 million", "exec-comp", "Executive compensation")
RESTRICTED = Document(page_content=f"# Executive compensation\n\n{SECRET} It is approved by the board in January.\n",
                      metadata={"url": "https://hr.example/exec-comp", "title": "Executive compensation",
                                "acl": {"groups": ["executives"]}})
PUBLIC = Document(page_content="# Staff bonus\n\nThe annual bonus for staff is paid in March. "
                               "The staff bonus pool is set by the board each year.\n",
                  metadata={"url": "https://hr.example/bonus", "title": "Staff bonus", "acl": "public"})
QUERY = "How large is the executive bonus pool for 2025 and when is the staff bonus paid?"
OFFLINE_PATH = ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]


class Down(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise ConnectionError("wiki is down")


def hr_graph(**kw: Any) -> Any:
    """Two sources: HR (one restricted, one public document) and a wiki that fails."""
    return build_graph(retriever=FederatedRetriever(sources=[
        Source(name="hr", source_type="policy", retriever=ListRetriever(docs=[RESTRICTED, PUBLIC])),
        Source(name="wiki", retriever=Down()),
    ]), **kw)


@pytest.fixture
def langsmith_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangSmithServer]:
    monkeypatch.setenv("LANGSMITH_DISABLE_RUN_COMPRESSION", "true")
    with LangSmithServer() as api:
        yield api


def traced(api: LangSmithServer, call: Any) -> Any:
    """Run `call` with LangSmith tracing on, sent to `api`; returns once every run was sent."""
    client = langsmith.Client(api_url=api.url, api_key="test-key")
    with langsmith.tracing_context(client=client, enabled=True, project_name="evident-tests"):
        out = call()
    wait_for_all_tracers()
    client.flush()
    return out


def node_runs(api: LangSmithServer) -> dict[str, dict[str, Any]]:
    """The finished runs of the trace, by name, each checked to hang directly under the root."""
    (root,) = api.finished("evident")
    nodes = ("rewrite", "retrieve", "extract_batch", "extract", "align", "insufficient", "generate", "verify",
             "postprocess")
    runs = {name: api.finished(name) for name in nodes}
    for name, found in runs.items():
        for run in found:
            assert run["parent_run_id"] == root["id"], name
            assert metadata(run)["langgraph_node"] == name
    return {name: found[0] for name, found in runs.items() if len(found) == 1}


# -- offline: every node, its metadata, and no hidden document anywhere -------------------------------


def test_every_node_is_a_run_with_its_summary_and_no_hidden_document(langsmith_api: LangSmithServer) -> None:
    g = hr_graph()
    principal = {"user": "bob", "groups": ["staff"]}
    out = traced(langsmith_api, lambda: g.invoke({"query": QUERY, "principal": principal}, context=EvidentContext()))
    assert "acl_dropped" not in out and out["status"] == "degraded"  # the count is for traces only
    runs = node_runs(langsmith_api)
    assert set(runs) == set(OFFLINE_PATH)

    retrieve = metadata(runs["retrieve"])
    assert retrieve["acl_dropped"] == 1 and retrieve["documents"] == 1
    assert retrieve["documents_by_source"] == {"hr": 1}
    by_source = {s["source"]: s for s in retrieve["sources"]}
    assert by_source["hr"]["status"] == "ok" and by_source["hr"]["documents"] == 1
    assert retrieve["denied_by_source"] == {"hr": 1}
    assert by_source["wiki"]["status"] == "error" and by_source["wiki"]["documents"] == 0
    assert all(isinstance(s["latency_ms"], float) for s in retrieve["sources"])
    assert [e["source"] for e in retrieve["source_errors"]] == ["wiki"]
    assert "wiki is down" in retrieve["source_errors"][0]["message"]

    extract = metadata(runs["extract"])
    assert extract["mode"] == "offline" and extract["extractor"] == "lexical" and extract["model"] is None
    assert extract["passages"] >= 1 and set(extract["passages_by_url"]) == {"https://hr.example/bonus"}

    align = metadata(runs["align"])
    assert align["passages"] == sum(align[a] for a in ("kept", "corrected", "truncated", "relinked", "dropped"))
    assert (align["ngram_n"], align["threshold"]) == (5, 0.7)
    for decision in align["decisions"]:
        assert decision["action"] in {"kept", "corrected", "truncated", "relinked", "dropped"}
        assert 0.0 <= decision["overlap"] <= 1.0 and decision["url"] == "https://hr.example/bonus"
        assert all(0 <= s < e for s, e in decision["spans"])

    assert metadata(runs["generate"])["generated_by"] == "offline"
    verify = metadata(runs["verify"])
    assert verify["sentences_removed"] == 0 and verify["sentences_kept"] >= 1
    post = metadata(runs["postprocess"])
    assert post["status"] == "degraded" and post["citations"] == len(out["citations"]) >= 1
    assert post["evidence"] == out["evidence"] == "clear"
    for name, run in runs.items():
        assert isinstance(metadata(run)["latency_ms"], float), name

    # Nothing LangSmith received mentions the restricted document: not its text, URL or title.
    sent = langsmith_api.sent_text()
    assert "staff bonus" in sent.lower()
    for marker in SECRET_MARKERS:
        assert marker not in sent, marker


def test_why_a_source_hid_itself_is_logged_and_traced_never_answered(
    langsmith_api: LangSmithServer, caplog: pytest.LogCaptureFixture,
) -> None:
    federation = FederatedRetriever(sources=[Source(name="crm", retriever=Unmapped()),
                                             Source(name="hr", retriever=ListRetriever(docs=[PUBLIC]))])
    principal = {"user": "x", "groups": ["staff"]}
    with caplog.at_level("WARNING", logger="evident.nodes.retrieve"):
        out = traced(langsmith_api, lambda: build_graph(retriever=federation).invoke(
            {"query": QUERY, "principal": principal}, context=EvidentContext()))
    assert [r["hidden"] for r in out["source_runs"]] == [[], []]  # the caller learns nothing about the source
    assert UNMAPPED_REASON not in str(out) and UNMAPPED_REASON in caplog.text
    assert metadata(node_runs(langsmith_api)["retrieve"])["hidden_sources"] == {"crm": [UNMAPPED_REASON]}


def test_the_restricted_document_is_traced_for_a_caller_who_may_see_it(langsmith_api: LangSmithServer) -> None:
    """The control for the test above: the same trace as an executive does carry the document."""
    g = hr_graph()
    out = traced(langsmith_api, lambda: g.invoke(
        {"query": QUERY, "principal": {"user": "carol", "groups": ["executives"]}}, context=EvidentContext()))
    assert "4.2 million" in out["answer"]
    assert "4.2 million" in langsmith_api.sent_text()


def test_the_short_circuit_is_traced_as_insufficient(langsmith_api: LangSmithServer) -> None:
    g = build_graph(retriever=retriever(TRAVEL))
    out = traced(langsmith_api, lambda: g.invoke({"query": "zygomorphic quasar lutefisk"}, context=EvidentContext()))
    assert out["status"] == "insufficient"
    runs = node_runs(langsmith_api)
    assert set(runs) == {"rewrite", "retrieve", "extract", "align", "insufficient", "postprocess"}
    assert metadata(runs["insufficient"])["reason"] == "no passage survived alignment"
    assert metadata(runs["postprocess"])["status"] == "insufficient"
    assert metadata(runs["postprocess"])["evidence"] == "none"


# -- LLM mode: the model's steps, their tokens and every alignment decision ----------------------------

DUE = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."


def test_llm_steps_carry_model_tokens_and_every_alignment_decision(
    server: OpenAIServer, langsmith_api: LangSmithServer
) -> None:
    server.script(
        extract=[passages_reply(
            (TRAVEL, BOOKING),  # verbatim: kept
            (TRAVEL, "Business class is allowed only for flights longer than 8 hours and for every director."),
            (TRAVEL, DUE),  # exists, but on the expenses page: relinked
            (TRAVEL, "Interns may travel first class on any flight they like."),  # invented: dropped
        )],
        generate=[Reply(content=f"{BOOKING} [{TRAVEL}]\n{DUE} [{EXPENSES}]\n"
                                f"Directors always fly first class. [{TRAVEL}]")],
    )
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES))
    out = traced(langsmith_api, lambda: g.invoke({"query": "What are the travel and expense rules?"},
                                                 context=llm_context(server)))
    assert out["status"] == "answered", out["model_errors"]
    runs = node_runs(langsmith_api)
    assert {"retrieve", "extract_batch", "extract", "align", "generate", "verify", "postprocess"} <= set(runs)

    batch = metadata(runs["extract_batch"])
    assert (batch["batch"], batch["of"], batch["documents"], batch["passages"]) == (1, 1, 2, 4)
    assert batch["model"] == "test-model" and batch["failed"] is False
    assert batch["tokens"]["calls"] == 1
    assert batch["tokens"]["input_tokens"] > 0 and batch["tokens"]["output_tokens"] > 0
    assert batch["prompt_tokens_estimate"] > 0

    extract = metadata(runs["extract"])
    assert (extract["mode"], extract["extractor"], extract["model"]) == ("llm", "model", "test-model")
    assert (extract["batches"], extract["failed_batches"], extract["passages"]) == (1, 0, 4)
    assert extract["tokens"] == batch["tokens"]  # the batches' tokens, added up
    assert extract["context_budget_tokens"] == 8000 and extract["batch_prompt_tokens_estimate"][0] > 0

    align = metadata(runs["align"])
    assert [(a, align[a]) for a in ("kept", "truncated", "relinked", "dropped")] == [
        ("kept", 1), ("truncated", 1), ("relinked", 1), ("dropped", 1)]
    decisions = {d["action"]: d for d in align["decisions"]}
    assert decisions["kept"]["overlap"] == 1.0 and decisions["kept"]["spans"]
    assert 0.0 < decisions["truncated"]["overlap"] <= 0.7 and decisions["truncated"]["spans"]
    assert decisions["relinked"]["original_url"] == TRAVEL and decisions["relinked"]["url"] == EXPENSES
    assert decisions["dropped"]["spans"] == [] and decisions["dropped"]["reason"]
    travel_text = documents(TRAVEL)[0].page_content
    (start, end), = decisions["kept"]["spans"]
    assert travel_text[start:end] == BOOKING  # spans are offsets into the retrieved text

    generate = metadata(runs["generate"])
    assert generate["generated_by"] == "model" and generate["model"] == "test-model"
    assert generate["sentences"] == 3 and generate["cited_urls"] == [TRAVEL, EXPENSES]
    assert generate["tokens"]["calls"] == 1 and generate["tokens"]["total_tokens"] > 0

    verify = metadata(runs["verify"])
    assert verify["sentences_removed"] == 1 and verify["removed_or_flagged"] == ["Directors always fly first class."]
    assert verify["sentences_kept"] == 2 and verify["answered_by"] == "model"

    # The model's own call is traced too, under its node.
    (llm_call,) = [r for r in langsmith_api.runs.values() if r.get("name") == "generate_answer"]
    assert llm_call["parent_run_id"] == runs["generate"]["id"]


def test_parallel_extraction_batches_are_runs_and_their_tokens_add_up(
    server: OpenAIServer, langsmith_api: LangSmithServer
) -> None:
    server.respond_with(echo_responder())
    # Characters as tokens: each of the three documents fills a 450-token batch on its own.
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES, REMOTE), token_counter=len)
    ctx = llm_context(server, context_budget_tokens=450)
    out = traced(langsmith_api, lambda: g.invoke({"query": "What are the travel rules?"}, context=ctx))
    assert out["status"] == "answered"
    assert len(langsmith_api.finished("evident")) == 1
    batches = langsmith_api.finished("extract_batch")
    assert len(batches) == 3 and {metadata(b)["of"] for b in batches} == {3}
    assert sorted(metadata(b)["batch"] for b in batches) == [1, 2, 3]
    (extract,) = langsmith_api.finished("extract")
    summary = metadata(extract)
    assert summary["batches"] == 3 and summary["batch_documents"] == [1, 1, 1]
    assert summary["tokens"]["calls"] == 3
    assert summary["tokens"]["input_tokens"] == sum(metadata(b)["tokens"]["input_tokens"] for b in batches)


def test_the_model_never_sees_a_hidden_document(langsmith_api: LangSmithServer) -> None:
    model = echo_model()
    g = hr_graph(chat_model=model)
    out = traced(langsmith_api, lambda: g.invoke({"query": QUERY, "principal": {"user": "bob"}},
                                                 context=fake_context()))
    assert "acl_dropped" not in out and model.prompts
    prompts = "\n".join(model.prompts)
    sent = langsmith_api.sent_text()
    for marker in SECRET_MARKERS:
        assert marker not in prompts and marker not in sent, marker


# -- tracing off costs little -------------------------------------------------------------------------


def test_no_tracer_no_trace_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a tracer a node counts no tokens and makes no trace summary (prompt-token estimates, settings):
    only the short summary its `stream_mode="custom"` progress event needs."""
    calls: list[str] = []
    real = instrument.trace_summary

    def counting(name: str, *args: Any, **kw: Any) -> dict[str, Any]:
        calls.append(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(instrument, "trace_summary", counting)
    g = hr_graph()
    g.invoke({"query": QUERY}, context=EvidentContext())
    list(g.stream({"query": QUERY}, context=EvidentContext(), stream_mode=["updates", "messages"]))
    build_graph(retriever=retriever(TRAVEL), chat_model=echo_model()).invoke(
        {"query": "How early must flights be booked?"}, context=fake_context())
    assert calls == []  # no tracer listening: no trace summary

    handler = RunCollectorCallbackHandler()
    g.invoke({"query": QUERY}, {"callbacks": [handler]}, context=EvidentContext())
    assert calls == OFFLINE_PATH  # the same graph, traced: one summary per step
    (root,) = handler.traced_runs
    assert [r.name for r in root.child_runs] == OFFLINE_PATH
    assert root.child_runs[1].extra["metadata"]["acl_dropped"] == 1


def test_caller_metadata_is_kept(langsmith_api: LangSmithServer) -> None:
    """A key the caller already put in the run's metadata is not overwritten by a summary."""
    g = build_graph(retriever=retriever(TRAVEL))
    handler = RunCollectorCallbackHandler()
    g.invoke({"query": "How early must flights be booked?"},
             {"callbacks": [handler], "metadata": {"documents": "caller's value", "team": "qa"}},
             context=EvidentContext())
    retrieve = handler.traced_runs[0].child_runs[1]
    assert retrieve.name == "retrieve"
    assert retrieve.extra["metadata"]["documents"] == "caller's value"
    assert retrieve.extra["metadata"]["evident_documents"] == 1 and retrieve.extra["metadata"]["team"] == "qa"


def test_async_invoke_is_traced_the_same_way(langsmith_api: LangSmithServer) -> None:
    import asyncio

    g = hr_graph()
    traced(langsmith_api, lambda: asyncio.run(g.ainvoke({"query": QUERY, "principal": {"user": "bob"}},
                                                        context=EvidentContext())))
    runs = node_runs(langsmith_api)
    assert set(runs) == set(OFFLINE_PATH)
    assert metadata(runs["retrieve"])["acl_dropped"] == 1 and metadata(runs["align"])["decisions"]
    for marker in SECRET_MARKERS:
        assert marker not in langsmith_api.sent_text()
