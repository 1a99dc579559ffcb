"""The re-verification tool in an agent (evident/agent/recheck_tool.py): a thread asks EvidenT, the cited page
is edited and then restricted, and the same thread's recheck reports the change, as the run's caller sees it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from evident.agent.recheck_tool import evident_recheck_tool
from evident.agent.tool import evident_tool
from evident.connectors.index.embedded import LocalIndex
from evident.context import EvidentContext
from tests.support.agents import ScriptedModel

QUESTION = "How many days of paid vacation do employees receive?"
LEAVE = {"url": "https://w/leave", "title": "Leave policy",
         "text": "Employees receive 30 days of paid vacation per calendar year. Unused days expire in March."}
TRAVEL = {"url": "https://w/travel", "title": "Travel", "text": "Economy class is required for short flights."}


def _write(path: Path, *pages: dict[str, Any]) -> None:
    path.write_text("".join(json.dumps(p) + "\n" for p in pages), encoding="utf-8")


def _recheck(thread: str) -> list[Any]:
    return [AIMessage("", tool_calls=[{"id": f"recheck-{thread}", "name": "evident_recheck", "args": {}}]),
            AIMessage("Checked.")]


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_a_thread_rechecks_its_answers_after_the_page_changes(tmp_path: Path) -> None:
    from langgraph.prebuilt import create_react_agent

    corpus, index = tmp_path / "pages.jsonl", tmp_path / "index.sqlite3"
    _write(corpus, LEAVE, TRAVEL)
    ctx = EvidentContext(corpus=[str(corpus)], index_path=str(index), embeddings="none")
    script = [AIMessage("", tool_calls=[{"id": "ask", "name": "evident_search", "args": {"query": QUESTION}}]),
              AIMessage("Thirty days."), *_recheck("1"), *_recheck("2")]
    agent = create_react_agent(ScriptedModel(messages=iter(script)),
                               [evident_tool(context=ctx), evident_recheck_tool(context=ctx)],
                               checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [HumanMessage("Vacation?")]}, thread)

    _write(corpus, {**LEAVE, "text": LEAVE["text"].replace("30 days", "25 days")}, TRAVEL)
    with LocalIndex(index) as stored:  # the operator re-indexes; the served index now holds the new text
        stored.refresh([corpus])
    out = agent.invoke({"messages": [HumanMessage("Does that still hold?")]}, thread)
    message = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "evident_recheck"][-1]
    [answer] = message.artifact["answers"]
    assert answer["query"] == QUESTION and answer["counts"] == {"changed": len(answer["checks"])}
    assert "25 days" in message.text and "changed" in message.text

    _write(corpus, {**LEAVE, "text": LEAVE["text"].replace("30 days", "28 days"), "metadata": {"acl": "group:hr"}},
           TRAVEL)
    with LocalIndex(index) as stored:
        stored.refresh([corpus])
    out = agent.invoke({"messages": [HumanMessage("And now?")]}, thread)
    message = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "evident_recheck"][-1]
    [answer] = message.artifact["answers"]
    # The page is hidden from this (anonymous) caller now: gone, and nothing of its text in the reply.
    assert {c["outcome"] for c in answer["checks"]} == {"gone"} and "28 days" not in json.dumps(message.artifact)
    assert "28 days" not in message.text and {c["content_hash_now"] for c in answer["checks"]} == {""}
