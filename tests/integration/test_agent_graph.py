"""`evident_agent`: a chat model that asks the EvidenT tool, then `verify_answer`, on the example corpus.

EvidenT runs for real (index, alignment, offline answer); the chat model is either absent (the offline agent)
or scripted: a `GenericFakeChatModel` whose `bind_tools` returns itself (tests/support/agents.py), replying
with the messages a test gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from evident.agent.graph import build_agent_graph, graph
from evident.agent.verify_answer import AnswerCheck
from evident.context import EvidentContext
from evident.models import INSUFFICIENT_ANSWER
from tests.support.agents import ScriptedModel

Q = "How many days do I have to submit an expense report after a trip?"
SAID = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
TRAVEL = "https://policies.tessellate.example/finance/travel-and-expenses"


class RecordingModel(ScriptedModel):
    """The scripted model (tests/support/agents.py), recording the tools it is offered at each turn."""

    offered: list[str] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingModel:
        self.offered.extend(getattr(t, "name", str(t)) for t in tools)
        return self


def scripted(*replies: AIMessage) -> RecordingModel:
    return RecordingModel(messages=iter(replies), offered=[])


def ask(question: str = Q) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "evident_search", "args": {"query": question}, "id": "ask-1"}])


def run(agent: Any, examples: Path, question: str = Q, **config: Any) -> dict[str, Any]:
    # By words alone (no embeddings model): the index of the examples is built in about a second.
    out: dict[str, Any] = agent.invoke({"messages": [HumanMessage(question)]},
                                       context=EvidentContext(corpus=[str(examples)], embeddings="none"), **config)
    return out


def test_offline_the_agent_asks_the_tool_and_answers_with_its_checked_content(examples: Path) -> None:
    out = run(graph, examples)
    human, call, result, final = out["messages"]
    assert call.tool_calls[0]["args"] == {"query": Q} and call.tool_calls[0]["name"] == "evident_search"
    assert isinstance(result, ToolMessage) and result.artifact["status"] == "answered"
    assert SAID in final.text and final.text == result.text  # nothing to correct in EvidenT's own answer
    check = AnswerCheck.model_validate(out["answer_check"])
    assert check.sentences and {s.status for s in check.sentences} == {"supported"}
    quoted = next(s for s in check.sentences if SAID in s.sentence)
    source = (examples / "policies" / "travel-and-expenses.md").read_text(encoding="utf-8")
    [(start, end)] = quoted.spans
    assert quoted.url == TRAVEL and quoted.quote in source and end - start == len(quoted.quote)
    assert final.response_metadata["evident_check"]["changed"] is False


def test_a_scripted_model_that_misquotes_a_number_is_contradicted_with_the_sources_words(examples: Path) -> None:
    model = scripted(ask(), AIMessage(
        "Expense reports must be submitted in Ledgerly within 45 days of the trip's end date [1]."))
    out = run(build_agent_graph(chat_model=model), examples)
    assert model.offered == ["evident_search", "evident_search"]  # bound for each of its two turns
    check = AnswerCheck.model_validate(out["answer_check"])
    [sentence] = check.sentences
    assert sentence.status == "contradicted"
    assert [(w.passage, w.source) for w in sentence.source_words] == [("45", "30")]
    assert sentence.quote == SAID and sentence.url == TRAVEL
    final = out["messages"][-1]
    assert final.text == f"{SAID} [1]"  # the source's words, under the mark that cites them
    tool_result = out["messages"][2]
    [passage] = [p for p in tool_result.artifact["passages"] if p["passage_id"] == sentence.citations[0].passage_id]
    start = passage["quote"].index(SAID)
    assert sentence.spans == [(passage["spans"][0][0] + start, passage["spans"][0][0] + start + len(SAID))]


def test_a_scripted_models_invented_sentence_is_removed_and_an_unresolved_mark_dropped(examples: Path) -> None:
    model = scripted(ask(), AIMessage(
        f"{SAID} [1] Late reports are paid with a 10 % surcharge [2]. See also [9]."))
    out = run(build_agent_graph(chat_model=model), examples)
    check = AnswerCheck.model_validate(out["answer_check"])
    assert [s.status for s in check.sentences] == ["supported", "unsupported", "unsupported"]
    assert out["messages"][-1].text == f"{SAID} [1]"


def test_the_model_must_answer_after_a_bounded_number_of_tool_rounds(examples: Path) -> None:
    calls = [AIMessage("", tool_calls=[{"name": "evident_search", "args": {"query": Q}, "id": f"c{i}"}])
             for i in range(4)]
    model = scripted(*calls, AIMessage(f"{SAID} [1]"))
    out = run(build_agent_graph(chat_model=model), examples)
    assert len(model.offered) == 4  # the fifth call is made without the tool
    assert out["messages"][-1].text == f"{SAID} [1]"


class FailingModel(ScriptedModel):
    """A chat model whose server is down."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("connection refused")


def test_a_failing_model_leaves_the_question_answered_offline(examples: Path) -> None:
    out = run(build_agent_graph(chat_model=FailingModel(messages=iter([]))), examples)
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert SAID in out["messages"][-1].text
    assert {s["status"] for s in out["answer_check"]["sentences"]} == {"supported"}


def test_a_follow_up_checks_only_its_own_answer(examples: Path) -> None:
    agent = build_agent_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    run(agent, examples, **{"config": config})
    out = run(agent, examples, "What is the nightly hotel cap in San Francisco?", config=config)
    check = AnswerCheck.model_validate(out["answer_check"])
    assert all("hotel" in s.sentence.casefold() or "350" in s.sentence for s in check.sentences
               if s.status == "supported")
    assert out["messages"][3].text.startswith(SAID)  # the first answer stands as it was
    assert check.evidence_calls == 2  # both calls' evidence is readable (marks resolve latest first)


def test_a_blank_question_is_answered_with_the_insufficient_answer() -> None:
    out = graph.invoke({"messages": [HumanMessage("   ")]})
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage"]
    assert out["messages"][-1].text == INSUFFICIENT_ANSWER
    assert out["answer_check"]["sentences"] == []


def test_the_messages_stream_shows_the_checked_answer_never_the_draft(examples: Path) -> None:
    # The model misquotes 30 days as 45: a reader of the messages stream must never see "45 days", only
    # the answer verify_answer wrote (the draft is kept out of `messages`, and the model call is `nostream`).
    model = scripted(ask(), AIMessage(
        "Expense reports must be submitted in Ledgerly within 45 days of the trip's end date [1]."))
    streamed = [chunk for chunk, _ in build_agent_graph(chat_model=model).stream(
        {"messages": [HumanMessage(Q)]}, context=EvidentContext(corpus=[str(examples)], embeddings="none"),
        stream_mode="messages")]
    said = [m.text for m in streamed if isinstance(m, AIMessage | AIMessageChunk)]
    assert said and not any("45 days" in text for text in said)
    assert said[-1] == f"{SAID} [1]"
