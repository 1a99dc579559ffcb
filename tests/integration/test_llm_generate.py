"""Answer generation through the model: streaming, async, the fallback preface, flagging, injection."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI

from evident.citations.answer import PREFACE
from evident.context import EvidentContext
from evident.graph import build_graph
from tests.support.llm import (
    BOOKING,
    BUSINESS,
    EXPENSES,
    REMOTE,
    TRAVEL,
    check_grounded,
    echo_responder,
    fake_context,
    llm_context,
    passages_json,
    passages_reply,
    retriever,
    scripted,
    server,
)
from tests.support.openai_server import OpenAIServer, Reply

__all__ = ["server"]

REMOTE_DAYS = "Remote work is allowed up to three days per week."


def test_the_draft_never_streams_and_the_final_answer_is_verified(server: OpenAIServer) -> None:
    draft = (f"You must book flights through the TravelDesk portal at least 14 days before departure. [{TRAVEL}]\n"
             f"Directors can always fly first class. [{TRAVEL}]")
    server.script(extract=[passages_reply((TRAVEL, BOOKING))], generate=[Reply(content=draft, chunk_chars=7)])
    g = build_graph(retriever=retriever(TRAVEL))
    messages: list[tuple[str, Any]] = []
    final: dict[str, Any] = {}
    for mode, item in g.stream({"query": "How early must flights be booked?"}, context=llm_context(server),
                               stream_mode=["messages", "values"]):
        if mode == "messages":
            message, meta = item
            messages.append((meta["langgraph_node"], message))
        else:
            final = item
    # The generation call is tagged `nostream`: no token of its draft, nor of the extraction's JSON, streams;
    # the one message is the verified answer as it joins `messages`.
    assert len(server.of_kind("generate")) == 1
    ((node, answer),) = messages
    assert node == "postprocess" and not isinstance(answer, AIMessageChunk) and answer.content == final["answer"]
    # The final answer is the verified one: the unsupported sentence is gone.
    assert final["status"] == "answered"
    assert "first class" not in final["answer"] and "14 days" in final["answer"]
    check_grounded(final)


def test_async_invoke_runs_the_llm_path(server: OpenAIServer) -> None:
    server.respond_with(echo_responder())
    g = build_graph(retriever=retriever(TRAVEL, REMOTE))
    q = {"query": "How early must flights be booked?"}
    sync = g.invoke(q, context=llm_context(server))
    out = asyncio.run(g.ainvoke(q, context=llm_context(server)))
    assert out["answer"] == sync["answer"] and out["status"] == "answered"
    assert len(server.of_kind("extract")) == 2 and len(server.of_kind("generate")) == 2
    check_grounded(out)


def test_the_does_not_explicitly_state_preface_is_kept_uncited() -> None:
    preface = (f"{PREFACE} whether economy flights can be booked 2 days ahead. "
               "Here are some details from the documentation which may help:")
    model = scripted(passages_json((TRAVEL, BOOKING), (TRAVEL, BUSINESS)),
                     f"{preface}\n- {BOOKING} [{TRAVEL}]\n- {BUSINESS} [{TRAVEL}]")
    out = build_graph(retriever=retriever(TRAVEL), chat_model=model).invoke(
        {"query": "Can I book an economy flight 2 days ahead?"}, context=fake_context())
    assert out["status"] == "answered"
    lines = out["answer"].splitlines()
    assert lines[0] == preface
    assert lines[1:] == [f"- {BOOKING} [{TRAVEL}]", f"- {BUSINESS} [{TRAVEL}]"]
    assert [c["sentence"] for c in out["citations"]] == [BOOKING, BUSINESS]
    check_grounded(out)


def test_unsupported_sentences_can_be_flagged_instead_of_removed() -> None:
    model = scripted(passages_json((TRAVEL, BOOKING)),
                     f"{BOOKING} [{TRAVEL}] Interns may book flights one day ahead. [{TRAVEL}]")
    out = build_graph(retriever=retriever(TRAVEL), chat_model=model).invoke(
        {"query": "How early must flights be booked?"}, context=fake_context(unsupported="flag"))
    assert "Interns may book flights one day ahead. [unsupported]" in out["answer"]
    assert out["removed_sentences"] == ["Interns may book flights one day ahead."]


def test_a_citation_is_repaired_to_the_passage_that_supports_the_sentence() -> None:
    model = scripted(passages_json((TRAVEL, BOOKING), (REMOTE, REMOTE_DAYS)),
                     f"Remote work is allowed for up to three days each week. [{TRAVEL}]\n{BOOKING} [{TRAVEL}]")
    query = "How many remote days are allowed and how early must flights be booked?"
    out = build_graph(retriever=retriever(TRAVEL, REMOTE), chat_model=model).invoke(
        {"query": query}, context=fake_context())
    assert out["answer"].splitlines() == [f"Remote work is allowed for up to three days each week. [{REMOTE}]",
                                          f"{BOOKING} [{TRAVEL}]"]
    remote = next(c for c in out["citations"] if c["url"] == REMOTE)
    assert remote["quote"] == REMOTE_DAYS  # a paraphrase resolves to the span of its passage
    check_grounded(out)


def test_an_injected_chat_model_is_used_without_any_model_setting(server: OpenAIServer) -> None:
    server.respond_with(echo_responder())
    model = ChatOpenAI(model="injected", base_url=server.base_url, api_key="k", max_retries=0, temperature=0)
    g = build_graph(retriever=retriever(EXPENSES), chat_model=model)
    out = g.invoke({"query": "When are expense reports due?"}, context=EvidentContext())
    assert out["mode"] == "llm" and out["status"] == "answered", out["model_errors"]
    assert {r.body["model"] for r in server.requests} == {"injected"}
    assert "30 days" in out["answer"]
    check_grounded(out)
    # mode="offline" still wins.
    n = len(server.requests)
    off = g.invoke({"query": "When are expense reports due?"}, context=EvidentContext(mode="offline"))
    assert len(server.requests) == n and off["model_errors"] == []
