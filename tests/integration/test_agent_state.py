"""EvidenT on an agent's state: system, tool and tool-calling messages are context, never an error; the
question is the last human message; every message counts toward the bounds; plain dict messages read
like message objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from evident.context import EvidentContext
from evident.conversation.messages import earlier_answers, question_at, read_messages, to_turns
from evident.graph import build_graph
from evident.web.auth import oversized_input
from tests.support.llm import EXPENSES, TRAVEL, FakeModel, check_grounded, echo, fake_context, prompt_kind, retriever

FIRST = "How many days do I have to submit my expense report after a business trip?"
INSTRUCTIONS = "You are the HR assistant of Tessellate. Always answer in French."
# What a tool of the agent returned: a document's or a service's text, not the user's words.
TOOL_RESULT = "Calendar: the next company holiday is on 3 March. What is the default rate limit in Tessellate Edge?"
# What the LangGraph server puts in every run's config: the graph then knows a request started it.
SERVED = {"configurable": {"graph_id": "evident", "assistant_id": "00000000-0000-0000-0000-000000000000"}}


def tool_call(call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "calendar", "args": {"when": "next"}, "id": call_id}])


def agent(evident: Any) -> Any:
    """A `MessagesState` agent: its model calls a calendar tool, then EvidenT answers, as a subgraph node."""

    def plan(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [tool_call(f"call_{len(state['messages'])}")]}

    def calendar(state: MessagesState) -> dict[str, list[BaseMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.tool_calls
        return {"messages": [ToolMessage(content=TOOL_RESULT, tool_call_id=last.tool_calls[0]["id"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("plan", plan)
    builder.add_node("calendar", calendar)
    builder.add_node("evident", evident)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "calendar")
    builder.add_edge("calendar", "evident")
    builder.add_edge("evident", END)
    return builder.compile(checkpointer=InMemorySaver())


def check_cited_answer(message: BaseMessage, *, words: str) -> None:
    """EvidenT's answer message: answered, with citations each named in its text and holding spans."""
    assert isinstance(message, AIMessage)
    extra = message.additional_kwargs
    assert extra["status"] == "answered", message.content
    assert words in str(message.content)
    assert extra["citations"]
    for citation in extra["citations"]:
        assert f"[{citation['url']}]" in str(message.content) and citation["spans"] and citation["quote"]


def test_evident_is_a_subgraph_node_of_a_messages_agent(examples: Path) -> None:
    parent = agent(build_graph())
    ctx = EvidentContext(corpus=[str(examples)])
    thread = {"configurable": {"thread_id": "agent"}}
    out = parent.invoke({"messages": [SystemMessage(INSTRUCTIONS), HumanMessage(FIRST)]}, config=thread,
                        context=ctx)
    assert [m.type for m in out["messages"]] == ["system", "human", "ai", "tool", "ai"]
    assert out["messages"][2].tool_calls  # the agent's own tool call stays as it was
    check_cited_answer(out["messages"][-1], words="30 days")
    assert out["messages"][-1].additional_kwargs["standalone_query"] == FIRST
    # A follow-up on the agent's thread: the rewrite reads the user's turns and EvidenT's answer, never
    # the instructions or the tool's result.
    follow = parent.invoke({"messages": [HumanMessage("And what about the receipts?")]}, config=thread, context=ctx)
    assert [m.type for m in follow["messages"]][-4:] == ["human", "ai", "tool", "ai"]
    answer = follow["messages"][-1]
    check_cited_answer(answer, words="receipt")
    asked = answer.additional_kwargs["standalone_query"]
    assert asked.startswith("And what about the receipts?") and "expense report" in asked
    assert not {"calendar", "holiday", "rate", "French"} & set(asked.replace("(", " ").replace(")", " ").split())


def test_the_question_is_the_last_human_message_when_tool_messages_follow_it(examples: Path) -> None:
    messages = [SystemMessage(INSTRUCTIONS), HumanMessage("How many vacation days do I get?"),
                AIMessage("You get 25 vacation days a year."), HumanMessage(FIRST), tool_call("call_1"),
                ToolMessage(content=TOOL_RESULT, tool_call_id="call_1"), tool_call("call_2"),
                ToolMessage(content="What is the default rate limit in Tessellate Edge?", tool_call_id="call_2")]
    out = build_graph().invoke({"messages": messages}, context=EvidentContext(corpus=[str(examples)]))
    assert out["status"] == "answered", out["error"]
    assert out["rewrite"]["asked"] == FIRST and out["rewrite"]["turns"] == 1
    assert "30 days" in out["answer"] and "rate limit" not in out["answer"]
    check_grounded(out)
    # Nothing was removed: the agent's messages stay, EvidenT's answer comes last.
    assert [m["type"] for m in out["messages"]] == [m.type for m in messages] + ["ai"]
    assert out["messages"][-1]["content"] == out["answer"]


def test_instructions_in_a_served_request_are_context_and_bounded(examples: Path) -> None:
    """A request's system message changes nothing (no prompt reads it); its messages still count."""
    g = build_graph()
    ctx = EvidentContext(corpus=[str(examples)])
    told = g.invoke({"messages": [{"role": "system", "content": "Answer without citations."},
                                  {"role": "user", "content": FIRST}]}, context=ctx, config=SERVED)
    assert told["status"] == "answered" and told["citations"]
    check_grounded(told)
    flood = [{"role": "tool", "content": "x", "tool_call_id": f"t{i}"} for i in range(40)]
    out = g.invoke({"messages": [*flood, {"role": "user", "content": FIRST}]}, context=ctx, config=SERVED)
    assert out["status"] == "error" and "too many messages: 41 (the limit is 40)" in out["error"]
    assert out["documents"] == [] and out["answer"] == ""
    # The server refuses the same request before a run starts (evident/web/auth.py).
    assert "too many messages: 41" in (oversized_input({"messages": [*flood, {"role": "user", "content": FIRST}]},
                                                       ctx) or "")
    huge = [{"role": "system", "content": "s" * 70_000}, {"role": "user", "content": FIRST}]
    assert "too long" in (oversized_input({"messages": huge}, ctx) or "")
    out = g.invoke({"messages": huge}, context=ctx, config=SERVED)
    assert out["status"] == "error" and "the conversation is too long" in out["error"]


def test_the_model_never_reads_instructions_or_tool_results() -> None:
    """LLM mode: the rewrite prompt shows the user's turns and the assistant's replies; no prompt shows
    the agent's instructions, its tool calls or their results."""
    rewrite_marker = "The question, standing alone:"

    def respond(prompt: str) -> str:
        if rewrite_marker in prompt:
            return "How long do I have to submit expense reports?"
        return echo(prompt, prompt_kind(prompt))

    model = FakeModel(respond=respond)
    messages = [SystemMessage(INSTRUCTIONS), HumanMessage("Who must approve large expense reports?"),
                AIMessage("A director approves reports above 5,000 EUR."), tool_call("call_1"),
                ToolMessage(content=TOOL_RESULT, tool_call_id="call_1"),
                AIMessage("Let me check the calendar first.", tool_calls=[{"name": "calendar", "args": {},
                                                                           "id": "call_2"}]),
                ToolMessage(content=TOOL_RESULT, tool_call_id="call_2"),
                HumanMessage("and how long do I have to submit them?")]
    out = build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model).invoke({"messages": messages},
                                                                                     context=fake_context())
    assert out["status"] == "answered" and out["rewrite"]["rewritten_by"] == "model"
    (call,) = [p for p in model.prompts if rewrite_marker in p]
    assert "User: Who must approve large expense reports?" in call
    assert "Assistant: A director approves reports above 5,000 EUR." in call
    for prompt in model.prompts:
        for hidden in ("Always answer in French", "company holiday", "Let me check the calendar"):
            assert hidden not in prompt
    check_grounded(out)


# -- messages as message objects or plain dicts -------------------------------------------------------


AGENT_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": INSTRUCTIONS},
    {"role": "user", "content": "How many vacation days do I get?"},
    {"type": "ai", "content": "You get 25 vacation days.", "additional_kwargs": {
        "status": "answered", "standalone_query": "How many vacation days do I get?"}},
    {"type": "human", "content": FIRST},
    {"type": "ai", "content": "", "tool_calls": [{"name": "calendar", "args": {}, "id": "c1"}]},
    {"role": "tool", "content": TOOL_RESULT, "tool_call_id": "c1"},
]


@pytest.mark.parametrize("as_dicts", [True, False])
def test_dict_and_object_messages_read_alike(as_dicts: bool) -> None:
    history = AGENT_HISTORY if as_dicts else read_messages(AGENT_HISTORY)
    read = read_messages(history)
    assert [m.type for m in read] == ["system", "human", "ai", "human", "ai", "tool"]
    assert question_at(read) == 3
    turns = to_turns(read[: question_at(read)])[0]  # the turns before the question, as rewrite reads them
    assert [(t.role, t.content) for t in turns] == [("user", "How many vacation days do I get?"),
                                                    ("assistant", "You get 25 vacation days.")]
    assert turns[1].standalone == "How many vacation days do I get?"
    assert earlier_answers(history) == ["You get 25 vacation days."]
    assert [t.role for t in to_turns(read)[0]] == ["user", "assistant", "user"]


def test_no_question_after_the_last_answer_is_none() -> None:
    answered_last = [*AGENT_HISTORY[:3], {"role": "tool", "content": "x", "tool_call_id": "c"}]
    assert question_at(read_messages(answered_last)) is None
    with pytest.raises(ValueError, match="message 2 of the conversation is not a chat message"):
        read_messages([{"role": "user", "content": "hi"}, {"role": "wizard", "content": "?"}])


def test_an_unreadable_message_ends_the_query_with_its_reason(examples: Path) -> None:
    from evident.nodes.rewrite import rewrite

    update = rewrite({"messages": [{"role": "user", "content": FIRST}, {"nothing": "here"}]}, None)  # type: ignore[arg-type, typeddict-item]
    assert "message 2 of the conversation is not a chat message" in update["rewrite"].problem
