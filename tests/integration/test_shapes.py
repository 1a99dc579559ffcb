"""What `graph.invoke` returns is JSON, as a server sends it; progress streams through LangGraph's stream writer;
node runs in traces carry ids and decisions, not document texts.

The served side of "the same shapes" (RemoteGraph, the SDK) is tests/e2e/test_shapes.py."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from evident.alignment.models import AlignmentDecision, Passage, SourceDocument
from evident.context import EvidentContext
from evident.graph import build_graph
from evident.models import Citation, RetrievedRef, Rewrite
from tests.integration.test_tracing import PUBLIC, QUERY, RESTRICTED, SECRET_MARKERS, hr_graph
from tests.support.llm import BOOKING, TRAVEL, TRAVEL_TEXT, retriever

Q = "How early must flights be booked?"
NODES = ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]


def is_json(value: Any) -> bool:
    """Whether `value` is made of JSON's own types only (what `json.loads` gives back, tuples aside)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(is_json(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def test_invoke_returns_json_that_the_models_validate() -> None:
    out = build_graph(retriever=retriever(TRAVEL)).invoke({"query": Q}, context=EvidentContext())
    assert out["status"] == "answered"
    assert is_json(out) and json.loads(json.dumps(out)) == out
    # The models read their own JSON back, field names unchanged (the agent tool validates them so).
    citation = Citation.model_validate(out["citations"][0])
    assert citation.quote.startswith(BOOKING) and citation.url == TRAVEL
    assert TRAVEL_TEXT[slice(*citation.spans[0])] == citation.quote
    assert SourceDocument.model_validate(out["documents"][0]).content == TRAVEL_TEXT
    assert [Passage.model_validate(p).url for p in out["passages"]] == [TRAVEL]
    assert AlignmentDecision.model_validate(out["alignment"][0]).action == "kept"
    assert RetrievedRef.model_validate(out["retrieved"][0]).url == TRAVEL
    assert Rewrite.model_validate(out["rewrite"]).asked == Q
    (answer,) = out["messages"]
    assert answer["type"] == "ai" and answer["content"] == out["answer"]
    assert answer["additional_kwargs"]["citations"] == out["citations"]


def test_a_checkpointed_thread_keeps_json_and_reads_its_conversation_back() -> None:
    graph = build_graph(retriever=retriever(TRAVEL), checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "shapes"}}
    first = graph.invoke({"messages": [HumanMessage(Q)]}, thread, context=EvidentContext())
    follow = graph.invoke({"messages": [{"role": "user", "content": "And business class?"}]}, thread,
                          context=EvidentContext())
    assert first["status"] == "answered" and follow["status"] == "answered"
    assert [m["type"] for m in follow["messages"]] == ["human", "ai", "human", "ai"]
    assert Rewrite.model_validate(follow["rewrite"]).turns == 1  # the follow-up read the earlier turn
    state = graph.get_state(thread).values
    assert is_json(state) and state["messages"] == follow["messages"]
    history = [s.values for s in graph.get_state_history(thread)]
    assert all(is_json(values) for values in history)


class Agent(MessagesState):
    answer: str


def test_a_messages_state_parent_gets_message_objects_back() -> None:
    evident = build_graph(retriever=retriever(TRAVEL))
    parent = StateGraph(Agent)
    parent.add_node("evident", evident)
    parent.add_edge(START, "evident")
    history = [HumanMessage("Hello", id="h0"), AIMessage("Hello! Ask me about travel.", id="a0"),
               HumanMessage(Q, id="h1")]
    out = parent.compile().invoke({"messages": history}, context=EvidentContext())
    *kept, answer = out["messages"]
    assert kept == history
    assert isinstance(answer, AIMessage) and answer.content == out["answer"]
    # The answer's own fields only: nothing of the JSON round trip left in `additional_kwargs`.
    assert set(answer.additional_kwargs) == {"status", "evidence", "standalone_query", "citations"}
    assert BOOKING in Citation.model_validate(answer.additional_kwargs["citations"][0]).quote


def test_custom_stream_reports_each_step_with_counts_and_no_hidden_document() -> None:
    graph = hr_graph()
    events = list(graph.stream({"query": QUERY}, context=EvidentContext(), stream_mode="custom"))
    assert [(e["node"], e["event"]) for e in events] == [(n, k) for n in NODES for k in ("start", "end")]
    ends = {e["node"]: e for e in events if e["event"] == "end"}
    # One public document: the restricted one is not counted (nor named) anywhere a caller reads.
    assert ends["retrieve"]["documents"] == 1 and "acl_dropped" not in ends["retrieve"]
    assert ends["extract"]["passages"] >= 1 and ends["align"]["verified"] >= 1
    assert ends["postprocess"]["status"] == "degraded" and ends["postprocess"]["citations"] >= 1
    assert all(isinstance(e["latency_ms"], float) for e in ends.values())
    sent = json.dumps(events)
    assert "bonus" not in sent.lower()  # counts and labels, not text
    for marker in SECRET_MARKERS:
        assert marker not in sent, marker


def node_runs(handler: RunCollectorCallbackHandler) -> dict[str, Any]:
    (root,) = handler.traced_runs
    return {run.name: run for run in root.child_runs}


def text_fields(value: Any) -> set[str]:
    """The keys of `value` (at any depth) that hold a document's or a passage's text."""
    if isinstance(value, dict):
        own = {k for k in value if k in {"content", "quote", "page_content", "text"}}
        return own.union(*(text_fields(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(text_fields(v) for v in value))
    return set()


def test_node_runs_record_ids_and_decisions_not_document_texts() -> None:
    handler = RunCollectorCallbackHandler()
    graph = hr_graph()
    out = graph.invoke({"query": QUERY, "principal": {"user": "ceo", "groups": ["executives"]}},
                       {"callbacks": [handler]}, context=EvidentContext())
    assert out["status"] == "degraded" and out["citations"]
    runs = node_runs(handler)
    assert set(runs) == set(NODES)
    for name, run in runs.items():
        recorded = [run.inputs, run.outputs]
        assert not text_fields(recorded), name
        sent = json.dumps(recorded, default=str)
        assert RESTRICTED.page_content not in sent and PUBLIC.page_content not in sent, name
        assert len(sent) < 6000, (name, len(sent))
    # What they read and decided, by id.
    align = runs["align"]
    assert [p["passage_id"] for p in align.inputs["passages"]] == [d["passage_id"] for d in out["alignment"]]
    assert {d["url"] for d in align.inputs["documents"]} == {d["url"] for d in out["documents"]}
    assert [(d["passage_id"], d["action"], d["spans"]) for d in align.outputs["alignment"]] == [
        (d["passage_id"], d["action"], [list(s) for s in d["spans"]]) for d in out["alignment"]]
    post = runs["postprocess"].outputs
    assert post["answer"] == out["answer"] and post["status"] == "degraded"
    assert [(c["url"], c["spans"]) for c in post["citations"]] == [(c["url"], c["spans"]) for c in out["citations"]]
    assert post["messages"][0]["type"] == "ai"
