"""Conversations through the graph: follow-ups on a checkpointed thread, offline and with a scripted
model, the answer as an `AIMessage`, the bounds on the request's messages, and the trace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from evident.context import EvidentContext
from evident.graph import build_graph
from evident.nodes.rewrite import RULE_FALLBACK
from tests.support.llm import EXPENSES, TRAVEL, FakeModel, check_grounded, echo, fake_context, prompt_kind, retriever

GUIDE = "https://policies.tessellate.example/finance/travel-and-expenses"
HOW_TO = "https://wiki.tessellate.example/finance/how-to-submit-expenses"
FIRST = "How many days do I have to submit my expense report after a business trip?"
REWRITE_MARKER = "The question, standing alone:"


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def check_answer_message(out: dict[str, Any]) -> None:
    """The last message is the verified answer (as its JSON dict, as a server sends it), with its citations and
    status."""
    message = out["messages"][-1]
    assert message["type"] == "ai"
    assert message["content"] == out["answer"]
    extra = message["additional_kwargs"]
    assert extra["status"] == out["status"] and extra["standalone_query"] == out["query"]
    assert extra["citations"] == out["citations"]


def test_a_three_turn_conversation_offline(examples: Path) -> None:
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)])
    turns = [FIRST, "And what about the receipts?", "how long does that take?"]
    outs = [g.invoke(say(t), config=thread("offline"), context=ctx) for t in turns]
    for i, out in enumerate(outs):
        assert out["status"] == "answered", out["error"]
        check_grounded(out)
        check_answer_message(out)
        # Nothing from an earlier turn is cited unless this turn retrieved it again.
        assert {c["url"] for c in out["citations"]} <= {r["url"] for r in out["retrieved"]}
        assert len(out["messages"]) == 2 * (i + 1)
        assert [m["type"] for m in out["messages"]] == ["human", "ai"] * (i + 1)
        assert out["rewrite"]["asked"] == turns[i] and out["rewrite"]["turns"] == i
    assert outs[0]["query"] == FIRST and outs[0]["rewrite"]["rewritten_by"] == "none"
    for out in outs[1:]:
        assert out["rewrite"]["rewritten_by"] == "rule" and out["standalone_query"] == out["query"]
        assert "expense report" in out["query"]
        # On the expenses pages; the receipts turn on the how-to page, not the first answer again.
        assert {c["url"] for c in out["citations"]} & {GUIDE, HOW_TO}
    assert "receipts" in outs[2]["query"]  # the chain keeps the second turn's topic too


def test_a_follow_up_is_searched_with_the_conversation_and_its_page_leads(examples: Path) -> None:
    history = [{"role": "user", "content": "What is the maximum hotel rate per night in San Francisco?"},
               {"role": "assistant", "content": "The nightly hotel cap is 350 USD in San Francisco. [x]"}]
    inputs = {"messages": [*history, {"role": "user", "content": "And in London?"}]}
    g = build_graph()
    out = g.invoke(inputs, context=EvidentContext(corpus=[str(examples)]))
    assert out["status"] == "answered" and out["retrieved"][0]["url"] == GUIDE
    check_grounded(out)
    # Weight 0: the new turn's ranking alone, as many documents.
    alone = g.invoke(inputs, context=EvidentContext(corpus=[str(examples)], conversation_weight=0.0))
    assert len(alone["retrieved"]) == len(out["retrieved"])


def test_a_query_is_answered_as_before_and_its_answer_joins_messages(examples: Path) -> None:
    g = build_graph()
    out = g.invoke({"query": FIRST}, context=EvidentContext(corpus=[str(examples)]))
    assert out["status"] == "answered" and "30 days" in out["answer"]
    assert out["query"] == out["standalone_query"] == FIRST and out["rewrite"]["rewritten_by"] == "none"
    assert len(out["messages"]) == 1
    check_answer_message(out)


def test_a_query_on_a_chat_thread_is_taken_as_it_is(examples: Path) -> None:
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)])
    g.invoke(say(FIRST), config=thread("mixed"), context=ctx)
    out = g.invoke({"query": "What is the default rate limit in Tessellate Edge?"}, config=thread("mixed"), context=ctx)
    assert out["query"] == "What is the default rate limit in Tessellate Edge?"
    assert out["rewrite"]["turns"] == 1 and out["rewrite"]["rewritten_by"] == "none"
    # A follow-up after it refers to it, through the question its answer recorded.
    follow = g.invoke(say("and what happens above it?"), config=thread("mixed"), context=ctx)
    assert follow["rewrite"]["rewritten_by"] == "rule" and "Tessellate Edge" in follow["query"]


@pytest.mark.parametrize(("messages", "expected"), [
    ([{"role": "system", "content": "Ignore the documents."}], "holds no question"),
    ([{"role": "user", "content": FIRST}, {"role": "tool", "content": "t" * 5000, "tool_call_id": "t1"},
      {"role": "user", "content": "and then?"}], "too long: 5"),
    ([{"role": "system", "content": "hi"}, {"role": "tool", "content": "hello", "tool_call_id": "t1"}] * 20
     + [{"role": "user", "content": FIRST}], "too many messages: 41 (the limit is 40)"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}] * 20
     + [{"role": "user", "content": FIRST}], "too many messages: 41 (the limit is 40)"),
    ([{"role": "user", "content": "x" * 3000}, {"role": "assistant", "content": "y" * 3000},
      {"role": "user", "content": FIRST}], "too long: 6"),
    ([{"role": "user", "content": "q" * 300}], "the query is too long: 300 characters"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}]}],
     "must be text"),
])
def test_a_refused_conversation_ends_the_query_and_leaves_the_thread_usable(
        examples: Path, messages: list[dict[str, Any]], expected: str) -> None:
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)], max_conversation_chars=5000, max_query_chars=200)
    out = g.invoke({"messages": messages}, config=thread("refused"), context=ctx)
    assert out["status"] == "error" and expected in out["error"]
    assert out["documents"] == [] and out["citations"] == [] and out["answer"] == ""
    # What the request added is gone; the error is the thread's last message.
    assert [m["type"] for m in out["messages"]] == ["ai"]
    assert out["messages"][0]["additional_kwargs"]["status"] == "error"
    assert expected in out["messages"][0]["content"]
    after = g.invoke(say(FIRST), config=thread("refused"), context=ctx)
    assert after["status"] == "answered" and after["error"] == "" and after["rewrite"]["problem"] == ""
    assert [m["type"] for m in after["messages"]] == ["ai", "human", "ai"]


def test_a_long_thread_keeps_its_latest_turns_within_the_limits(examples: Path) -> None:
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)], max_messages=5)
    for i in range(4):
        out = g.invoke(say(FIRST if i % 2 == 0 else "and the receipts?"), config=thread("long"), context=ctx)
        assert out["status"] == "answered"
        assert len(out["messages"]) <= 4  # room for the next question
    assert [m["type"] for m in out["messages"]][-2:] == ["human", "ai"]
    assert out["rewrite"]["rewritten_by"] == "rule"  # the kept turns still carry the topic


def test_the_rewrite_is_a_traced_step(examples: Path) -> None:
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)])
    g.invoke(say(FIRST), config=thread("traced"), context=ctx)
    handler = RunCollectorCallbackHandler()
    out = g.invoke(say("how long does that take?"), config={**thread("traced"), "callbacks": [handler]},
                   context=ctx)
    (root,) = handler.traced_runs
    rewrite = root.child_runs[0]
    assert rewrite.name == "rewrite"
    meta = rewrite.extra["metadata"]
    assert meta["asked"] == "how long does that take?" and meta["rewritten_by"] == "rule"
    assert meta["standalone_query"] == out["query"] and meta["turns"] == 1


# -- LLM mode: the rewrite call ------------------------------------------------------------------------


def rewriting(question: str | Exception) -> Any:
    """The echo model's replies, except that a rewrite call gets `question` (or fails with it)."""

    def respond(prompt: str) -> str:
        if REWRITE_MARKER not in prompt:
            return echo(prompt, prompt_kind(prompt))
        if isinstance(question, Exception):
            raise question
        return question

    return respond


def rewrites(model: FakeModel) -> list[str]:
    return [p for p in model.prompts if REWRITE_MARKER in p]


def test_the_model_rewrites_a_follow_up() -> None:
    model = FakeModel(respond=rewriting("How long is the deadline for submitting expense reports?"))
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES), checkpointer=InMemorySaver(), chat_model=model)
    ctx = fake_context()
    first = g.invoke(say("Who must approve large expense reports?"), config=thread("llm"), context=ctx)
    assert first["rewrite"]["rewritten_by"] == "none"
    assert not rewrites(model)  # a first question needs no rewrite
    chunks = list(g.stream(say("and how long do I have to submit them?"), config=thread("llm"), context=ctx,
                           stream_mode=["messages", "values"]))
    out = [item for mode, item in chunks if mode == "values"][-1]
    assert out["query"] == "How long is the deadline for submitting expense reports?"
    assert out["rewrite"]["rewritten_by"] == "model" and out["status"] == "answered"
    (call,) = rewrites(model)
    assert "User: Who must approve large expense reports?" in call
    assert "Assistant: " in call and "Latest message: and how long do I have to submit them?" in call
    check_grounded(out)
    check_answer_message(out)
    # The rewrite's reply never reaches a chat client's stream: only the verified answer.
    nodes = {meta["langgraph_node"] for mode, (message, meta) in
             ((m, i) for m, i in chunks if m == "messages")}
    assert nodes == {"postprocess"}
    assert all("How long is the deadline" not in (m.content or "")
               for mode, (m, _) in ((x, i) for x, i in chunks if x == "messages") if isinstance(m, AIMessageChunk))


def test_a_failing_rewrite_call_falls_back_to_the_rule() -> None:
    model = FakeModel(respond=rewriting(RuntimeError("the model is down")))
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES), checkpointer=InMemorySaver(), chat_model=model)
    ctx = fake_context()
    g.invoke(say("Who must approve large expense reports?"), config=thread("down"), context=ctx)
    out = g.invoke(say("and how long do I have to submit them?"), config=thread("down"), context=ctx)
    assert out["status"] == "degraded"
    assert out["rewrite"]["rewritten_by"] == "rule" and "expense" in out["query"]
    (error,) = out["model_errors"]
    assert error["message"].startswith("rewrite") and RULE_FALLBACK in error["message"]
    assert out["timings_ms"]["rewrite"] >= 0
    check_grounded(out)
    # The next turn starts afresh: the failure is not carried over.
    model.respond = rewriting("How long do I have to submit expense reports?")
    again = asyncio.run(g.ainvoke(say("and receipts?"), config=thread("down"), context=ctx))
    assert again["model_errors"] == [] and again["status"] == "answered"
    assert again["rewrite"]["rewritten_by"] == "model"


def test_a_reply_to_the_assistants_question_is_rewritten_by_the_model() -> None:
    """The model sees the assistant's question and the reply; its question is the one answered."""
    model = FakeModel(respond=rewriting("Do large expense reports need a second approval?"))
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model)
    ctx = fake_context()
    messages = [HumanMessage("Who must approve large expense reports?"),
                AIMessage("Your manager approves them. Is the report above 5,000 USD?"), HumanMessage("yes")]
    out = g.invoke({"messages": messages}, context=ctx)
    assert out["rewrite"]["rewritten_by"] == "model" and out["status"] == "answered"
    assert out["standalone_query"] == out["query"] == "Do large expense reports need a second approval?"
    (call,) = rewrites(model)
    assert "Assistant: Your manager approves them. Is the report above 5,000 USD?" in call
    assert "Latest message: yes" in call
    assert "replies to a question the assistant asked" in call  # the prompt says how to read it
    check_grounded(out)


ISSUE_FIRST = "How many days do I have to submit an expense report after a trip?"


def test_follow_ups_answer_what_they_add(examples: Path) -> None:
    """Each follow-up is answered about its own words; an earlier answer's sentences are not repeated."""
    g = build_graph(checkpointer=InMemorySaver())
    ctx = EvidentContext(corpus=[str(examples)])
    turns = [ISSUE_FIRST, "And who approves it?", "And what about the receipts?"]
    first, approves, receipts = (g.invoke(say(t), config=thread("focus"), context=ctx) for t in turns)
    said = {c["sentence"] for c in first["citations"]}
    assert any("Your manager approves it, then Finance checks it." in c["quote"] for c in approves["citations"])
    # The carried terms are marked, and weigh below the new turn's words.
    assert approves["query"].startswith("And who approves it? (") and "expense" in approves["query"]
    assert receipts["answer"] != first["answer"]
    assert not said & {c["sentence"] for c in receipts["citations"]}
    assert all("receipt" in c["quote"].lower() for c in receipts["citations"])
    g.invoke(say("How many vacation days do I get?"), config=thread("leave"), context=ctx)
    carry = g.invoke(say("And can I carry them over?"), config=thread("leave"), context=ctx)
    assert any("You may carry over up to 5 unused days" in c["quote"] for c in carry["citations"])


def test_the_model_is_not_offered_a_passage_an_earlier_answer_gave() -> None:
    """LLM mode: generation sees only the passages the conversation has not already been given."""
    model = FakeModel(respond=rewriting("What else do the travel and expense policies say?"))
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model)
    ctx = fake_context()
    said = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
    messages = [HumanMessage("When are expense reports due?"), AIMessage(f"{said} [{EXPENSES}]"),
                HumanMessage("what else?")]
    out = g.invoke({"messages": messages}, context=ctx)
    assert out["status"] == "answered"
    assert said in {d["quote"] for d in out["verified"]}  # extracted and verified again ...
    generation = model.prompts[-1]
    assert "Employees must book flights" in generation
    assert said not in generation  # ... but not offered to the answer
    assert said not in out["answer"]
    check_grounded(out)
