"""EvidenT as a LangChain tool (evident/agent/tool.py): what the model reads, the artifact that keeps the
citations, who is asking, failures, and the tool inside prebuilt agents driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver

from evident.agent.artifact import EvidenceArtifact
from evident.agent.evidence import evidence_artifact, tool_content
from evident.agent.tool import evident_tool
from evident.citations.answer import PREFACE
from evident.context import EvidentContext
from evident.graph import build_graph, graph
from evident.models import SourceDocument
from tests.support.agents import ScriptedModel, asking
from tests.support.offline import CLEAR_QUESTION, HANDBOOK, WEAK_QUESTION

EXPENSES = "How many days do I have to submit an expense report after a trip?"
PAGES = [
    {"url": "https://w/expenses", "title": "Expense reports",
     "text": "Submit an expense report within thirty days. PELICAN is the expense system."},
    {"url": "https://w/travel", "title": "Travel bookings",
     "text": "Book travel through the portal and mind the expense limits that apply."},
    {"url": "https://w/secret", "title": "Board review", "metadata": {"acl": "group:board"},
     "text": "The ZEBRAFINCH programme pays board members a bonus of 40 percent. It is confidential to the board."},
]
SECRET_QUESTION = "What does the ZEBRAFINCH programme pay board members?"
SECRET_WORDS = ("https://w/secret", "40 percent", "Board review")
CAROL = {"identity": "carol", "groups": ["board"], "is_authenticated": True}
BOB = {"identity": "bob", "groups": ["staff"], "is_authenticated": True}


def _served(user: dict[str, Any]) -> RunnableConfig:
    """A run's config as the LangGraph server makes it: the graph and the authenticated user."""
    return {"configurable": {"graph_id": "evident_agent", "assistant_id": "a-1", "langgraph_auth_user": user}}


@pytest.fixture
def acl_corpus(tmp_path: Path) -> EvidentContext:
    path = tmp_path / "pages.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PAGES) + "\n", encoding="utf-8")
    return EvidentContext(corpus=[str(path)], embeddings="none")


def _call(tool: Any, query: str, config: RunnableConfig | None = None, **extra: Any) -> ToolMessage:
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": tool.name,
                           "args": {"query": query, **extra}}, config=config)
    assert isinstance(message, ToolMessage)
    return message


def _leaks(message: ToolMessage) -> list[str]:
    seen = message.text + json.dumps(message.artifact)
    return [word for word in SECRET_WORDS if word in seen]


def test_the_model_reads_numbered_marks_and_the_artifact_keeps_the_spans(examples: Path) -> None:
    ctx = EvidentContext(corpus=[str(examples)])
    message = _call(evident_tool(context=ctx), EXPENSES)
    state = graph.invoke({"query": EXPENSES}, context=ctx)
    artifact = EvidenceArtifact.model_validate(message.artifact)
    assert artifact.status == "answered" and artifact.answer == state["answer"] and artifact.evidence == "clear"
    assert json.loads(json.dumps(message.artifact)) == message.artifact  # plain JSON, as a checkpoint keeps it
    content = message.text
    assert "30 days" in content and "[1]" in content and "[https://" not in content
    sources = content.split("\n\nSources:\n")[1].splitlines()
    numbers = sorted({c.number for c in artifact.citations})
    assert numbers == list(range(1, len(numbers) + 1)) and len(sources) == len(numbers)
    documents = {d["url"]: SourceDocument.model_validate(d) for d in state["documents"]}
    for citation in artifact.citations:
        document = documents[citation.url]
        # Each source under what its first quote is about: that heading path (title › section), else its title.
        first = next(c for c in artifact.citations if c.number == citation.number)
        where = " › ".join(first.heading_path) or document.title
        assert citation.heading_path[:1] == [document.title]
        assert sources[citation.number - 1] == f"[{citation.number}] {where} — {citation.url}"
        assert citation.content_hash == document.content_hash
        # The revision of the file the document was read from, as the state's citation pins it.
        assert citation.revision == document.metadata["revision"] and citation.revision.startswith("mtime_ns=")
        assert citation.revision in {c["revision"] for c in state["citations"] if c["url"] == citation.url}
        assert citation.spans and citation.quote == " … ".join(document.content[s:e] for s, e in citation.spans)
        assert f"[{citation.number}]" in content
    assert {p.passage_id for p in artifact.passages} >= {p for c in artifact.citations for p in c.passage_ids}
    for passage in artifact.passages:
        assert passage.content_hash == documents[passage.url].content_hash


def test_a_json_state_reads_as_the_models_do_and_a_heading_path_is_kept(examples: Path) -> None:
    state = graph.invoke({"query": EXPENSES}, context=EvidentContext(corpus=[str(examples)]))
    as_json = json.loads(json.dumps({k: state[k] for k in ("status", "answer", "citations", "documents",
                                                           "verified", "source_errors")},
                                    default=lambda m: m.model_dump(mode="json")))
    assert evidence_artifact(EXPENSES, as_json) == evidence_artifact(EXPENSES, state)
    path = ["Travel and Expense Policy", "Claiming expenses"]
    as_json["citations"][0]["heading_path"] = path
    with_path = evidence_artifact(EXPENSES, as_json)
    assert with_path.citations[0].heading_path == path
    first = with_path.citations[0]
    assert f"[{first.number}] Travel and Expense Policy › Claiming expenses — {first.url}" in tool_content(with_path)


def test_the_model_can_set_only_the_question(acl_corpus: EvidentContext) -> None:
    tool = evident_tool(context=acl_corpus)
    assert set(tool.args) == {"query"}
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"query"}
    assert tool.response_format == "content_and_artifact"
    # A principal (or a setting) the model writes into its call is not an argument: it is dropped unread.
    message = _call(tool, SECRET_QUESTION, principal={"user": "carol", "groups": ["board"]}, top_n=50)
    assert _leaks(message) == [] and message.artifact["status"] == "insufficient"
    assert message.artifact["evidence"] == "none"


def test_the_served_caller_decides_what_the_tool_reads(acl_corpus: EvidentContext) -> None:
    # Bound to carol by the developer, the tool still answers a served run as its authenticated user.
    tool = evident_tool(context=acl_corpus, principal={"user": "carol", "groups": ["board"]})
    bob = _call(tool, SECRET_QUESTION, _served(BOB))
    assert _leaks(bob) == [] and bob.artifact["status"] == "insufficient" and bob.artifact["citations"] == []
    # A run that carries a server's user is never the bound principal's, even one the graph would not
    # take for a served run (no graph id): it is then anonymous.
    assert _leaks(_call(tool, SECRET_QUESTION, {"configurable": {"langgraph_auth_user": BOB}})) == []
    carol = _call(evident_tool(context=acl_corpus), SECRET_QUESTION, _served(CAROL))
    assert carol.artifact["status"] == "answered" and "40 percent" in carol.text
    assert [c["url"] for c in carol.artifact["citations"]] == ["https://w/secret"]


def test_a_bound_principal_is_the_caller_of_a_local_run(acl_corpus: EvidentContext) -> None:
    assert _leaks(_call(evident_tool(context=acl_corpus), SECRET_QUESTION)) == []  # anonymous: public only
    bound = _call(evident_tool(context=acl_corpus, principal={"user": "carol", "groups": ["board"]}),
                  SECRET_QUESTION)
    assert "40 percent" in bound.text


class _Down(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise ConnectionError("the wiki is down")


def test_a_failing_query_says_so_and_the_artifact_keeps_the_status(tmp_path: Path) -> None:
    missing = _call(evident_tool(context=EvidentContext(corpus=[str(tmp_path / "nope")])), "Anything at all?")
    assert missing.artifact["status"] == "error" and "nope" in missing.artifact["error"]
    assert missing.artifact["evidence"] == "none"
    assert missing.text.startswith("EvidenT could not answer this question:") and "nope" in missing.text
    degraded = _call(evident_tool(build_graph(retriever=_Down())), "When do flights book?")
    assert degraded.artifact["status"] == "degraded"
    assert degraded.artifact["source_errors"] and "could not be searched" in degraded.text


def test_a_hedged_answer_is_marked_for_the_agent(tmp_path: Path) -> None:
    # The page says when unused days expire, not whether they are paid out: the artifact says the evidence
    # is weak, and the model reads the answer's hedge first.
    (tmp_path / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    tool = evident_tool(context=EvidentContext(corpus=[str(tmp_path)], embeddings="none"))
    message = _call(tool, WEAK_QUESTION)
    assert (message.artifact["status"], message.artifact["evidence"]) == ("answered", "weak")
    assert message.text.startswith(PREFACE) and "[1]" in message.text
    assert _call(tool, CLEAR_QUESTION).artifact["evidence"] == "clear"
    # An artifact a thread kept from before the field existed reads as its status said.
    old = {k: v for k, v in message.artifact.items() if k != "evidence"}
    assert EvidenceArtifact.model_validate(old).evidence == "clear"
    assert EvidenceArtifact.model_validate({**old, "status": "insufficient", "citations": []}).evidence == "none"


def _unreachable(inputs: dict[str, Any]) -> dict[str, Any]:
    raise ConnectionError("the EvidenT server did not answer")


def test_a_graph_that_raises_is_an_error_the_model_can_read() -> None:
    message = _call(evident_tool(RunnableLambda(_unreachable)), "When must flights be booked?")
    assert message.artifact["status"] == "error" and message.status == "success"
    assert message.text == "EvidenT could not answer this question: ConnectionError: the EvidenT server did not answer"


def test_the_content_is_bounded_and_the_artifact_is_whole(examples: Path) -> None:
    ctx = EvidentContext(corpus=[str(examples)])
    whole = _call(evident_tool(context=ctx), EXPENSES)
    short = _call(evident_tool(context=ctx, max_chars=300), EXPENSES)
    assert len(short.text) <= 300 < len(whole.text)
    assert "answer shortened" in short.text and short.artifact["answer"] == whole.artifact["answer"]


def test_async_calls_answer_the_same(examples: Path) -> None:
    tool = evident_tool(context=EvidentContext(corpus=[str(examples)]))
    call = {"type": "tool_call", "id": "call-1", "name": tool.name, "args": {"query": EXPENSES}}
    message = asyncio.run(tool.ainvoke(call))
    assert message.content == _call(tool, EXPENSES).content


# -- inside prebuilt agents ------------------------------------------------------------------------


def _script(*questions: str) -> Iterator[AIMessage]:
    return asking("evident_search", *questions)


def _tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _assert_cited(message: ToolMessage, url: str) -> None:
    artifact = EvidenceArtifact.model_validate(message.artifact)
    assert artifact.status == "answered" and url in {c.url for c in artifact.citations}
    assert all(c.spans and c.content_hash for c in artifact.citations)


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_in_create_react_agent_the_tool_message_keeps_the_artifact(acl_corpus: EvidentContext) -> None:
    from langgraph.prebuilt import create_react_agent

    saver = InMemorySaver()
    agent = create_react_agent(ScriptedModel(messages=_script("Who must submit an expense report?",
                                                              SECRET_QUESTION)),
                               [evident_tool(context=acl_corpus)], checkpointer=saver)
    thread: RunnableConfig = {"configurable": {"thread_id": "t-1"}}
    steps = list(agent.stream({"messages": [HumanMessage("Expense reports?")]}, thread, subgraphs=True,
                              stream_mode="updates"))
    assert any(ns and "retrieve" in update for ns, update in steps)  # EvidenT's steps stream as a subgraph's
    # The agent's thread keeps its own checkpoints only: EvidenT's state (documents and all) is not kept there.
    assert {ns for checkpoints in saver.storage.values() for ns in checkpoints} == {""}
    out = agent.get_state(thread).values
    [first] = _tool_messages(out["messages"])
    _assert_cited(first, "https://w/expenses")
    assert "[1]" in first.text and out["messages"][-1].content == "Answered from the documents [0]."
    # A second question on the same thread: a new tool message with its own evidence; the anonymous agent
    # never gets the board's page.
    out = agent.invoke({"messages": [HumanMessage("And the board?")]}, thread)
    messages = _tool_messages(out["messages"])
    assert len(messages) == 2 and messages[1].artifact["status"] == "insufficient" and _leaks(messages[1]) == []
    saved = agent.get_state(thread).values["messages"]
    assert _tool_messages(saved)[0].artifact == first.artifact  # the checkpoint keeps the artifact


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_in_create_react_agent_the_served_user_is_the_caller(acl_corpus: EvidentContext) -> None:
    from langgraph.prebuilt import create_react_agent

    def ask(user: dict[str, Any]) -> ToolMessage:
        agent = create_react_agent(ScriptedModel(messages=_script(SECRET_QUESTION)), [evident_tool(context=acl_corpus)])
        [message] = _tool_messages(agent.invoke({"messages": [HumanMessage("Board pay?")]}, _served(user))["messages"])
        return message

    _assert_cited(ask(CAROL), "https://w/secret")
    assert _leaks(ask(BOB)) == []


def test_in_langchains_create_agent_the_tool_message_keeps_the_artifact(acl_corpus: EvidentContext) -> None:
    from langchain.agents import create_agent

    agent = create_agent(ScriptedModel(messages=_script("Who must submit an expense report?")),
                         [evident_tool(context=acl_corpus)])
    out = agent.invoke({"messages": [HumanMessage("Expense reports?")]})
    [message] = _tool_messages(out["messages"])
    _assert_cited(message, "https://w/expenses")
    assert out["messages"][-1].content == "Answered from the documents [0]."
