"""The EvidenT graph end to end on the embedded default: real index, real alignment, no mocks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.runtime import Runtime

from evident.citations.answer import citations_in, parse_answer
from evident.context import EvidentContext
from evident.graph import build_graph, graph
from evident.models import INSUFFICIENT_ANSWER
from tests.support.offline import CLEAR_QUESTION, HANDBOOK, WEAK_QUESTION


def _ctx(corpus: Path, **kw: Any) -> EvidentContext:
    return EvidentContext(corpus=[str(corpus)], **kw)


def _check_grounded(out: dict[str, Any]) -> None:
    """Every cited sentence resolves to retrieved text; every quote is the document's own text."""
    docs = {d["url"]: d for d in out["documents"]}
    assert out["citations"], out["answer"]
    for c in out["citations"]:
        assert c["url"] in docs, c["url"]
        assert c["spans"]
        text = docs[c["url"]]["content"]
        for start, end in c["spans"]:
            assert 0 <= start < end <= len(text)
        quoted = [text[s:e] for s, e in c["spans"]]
        assert c["quote"] == " … ".join(quoted) or c["quote"].replace(" … ", "") == "".join(quoted)
    for url in citations_in(out["answer"]):
        assert url in docs
    for line in parse_answer(out["answer"]):
        for unit in line.sentences:
            assert unit.urls or unit.text.startswith("The documentation does not explicitly state")


def test_answers_with_resolved_citations(examples: Path) -> None:
    out = graph.invoke(
        {"query": "How many days do I have to submit an expense report after a trip?"},
        context=_ctx(examples),
    )
    assert out["status"] == "answered"
    assert "30 days" in out["answer"]
    _check_grounded(out)
    assert {"rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"} <= set(out["timings_ms"])
    assert all(d["action"] in {"kept", "truncated", "relinked", "dropped"} for d in out["alignment"])


def test_async_invoke_gives_the_same_answer(examples: Path) -> None:
    q = {"query": "What is the default rate limit in Tessellate Edge?"}
    sync = graph.invoke(q, context=_ctx(examples))
    out = asyncio.run(graph.ainvoke(q, context=_ctx(examples)))
    assert out["answer"] == sync["answer"]
    _check_grounded(out)


def test_short_circuit_to_insufficient(examples: Path) -> None:
    steps: list[str] = []
    for chunk in graph.stream(
        {"query": "zygomorphic quasar lutefisk"}, context=_ctx(examples), stream_mode="updates"
    ):
        steps.extend(chunk)
    assert "insufficient" in steps and "generate" not in steps and "verify" not in steps
    out = graph.invoke({"query": "zygomorphic quasar lutefisk"}, context=_ctx(examples))
    assert out["answer"] == INSUFFICIENT_ANSWER
    assert out["citations"] == [] and out["status"] == "insufficient" and out["evidence"] == "none"


def test_weak_evidence_is_answered_with_the_preface(tmp_path: Path) -> None:
    # The page says when unused days expire, not whether they are paid out: the gate admits it by a
    # narrow margin, so the answer says first that the documentation does not state it.
    (tmp_path / "handbook.md").write_text(HANDBOOK)
    query = {"query": WEAK_QUESTION}
    out = graph.invoke(query, context=_ctx(tmp_path, embeddings="none"))
    assert out["status"] == "answered" and out["evidence"] == "weak"  # marked for machines, not only in words
    assert out["answer"].startswith("The documentation does not explicitly state the answer")
    assert "Unused days expire on 31 March" in out["answer"]
    _check_grounded(out)
    plain = graph.invoke(query, context=_ctx(tmp_path, embeddings="none", answer_hedge_margin=0.0))
    assert plain["status"] == "answered" and not plain["answer"].startswith("The documentation")
    assert plain["evidence"] == "clear"
    assert {c["url"] for c in plain["citations"]} == {c["url"] for c in out["citations"]}
    # A question the page answers outright is not hedged.
    sure = graph.invoke({"query": CLEAR_QUESTION}, context=_ctx(tmp_path, embeddings="none"))
    assert sure["answer"].startswith("Employees get 25 days") and sure["evidence"] == "clear"


def test_quotes_carry_their_heading_path(tmp_path: Path) -> None:
    # The sentence that answers says "The default value is three connections." and nothing of what it is
    # about: its heading path (the page, the section, the entry's term) says it, in the passage and citation.
    (tmp_path / "settings.html").write_text(
        "<html><head><title>Server settings</title></head><body><main><h1>Server settings</h1>"
        "<h2>Connections</h2><dl><dt>max_connections</dt><dd><p>How many clients may connect at once.</p>"
        "<p>The default value is one hundred connections.</p></dd><dt>reserved_connections</dt>"
        "<dd><p>Slots kept for administrators.</p><p>The default value is three connections.</p></dd></dl>"
        "<h2>Logging</h2><p>Logs are written to the data directory every day.</p></main></body></html>"
    )
    out = graph.invoke({"query": "What is the default of reserved_connections?"},
                       context=_ctx(tmp_path, embeddings="none"))
    _check_grounded(out)
    three = [c for c in out["citations"] if "three connections" in c["quote"]]
    assert three, out["answer"]
    assert three[0]["heading_path"] == ["Server settings", "Connections", "reserved_connections"]
    assert all(c["heading_path"][:2] == ["Server settings", "Connections"] for c in out["citations"])
    assert all(d["heading_path"] and d["heading_path"][0] == "Server settings" for d in out["verified"])


@pytest.mark.parametrize(
    ("query", "message"),
    [("", "empty"), ("   \n\t ", "empty"), ("x" * 100_000, "too long")],
)
def test_bad_queries_are_errors_not_crashes(examples: Path, query: str, message: str) -> None:
    out = graph.invoke({"query": query}, context=_ctx(examples))
    assert out["status"] == "error" and message in out["error"]
    assert out["answer"] == "" and out["citations"] == []


def test_missing_and_empty_corpus(tmp_path: Path) -> None:
    out = graph.invoke({"query": "anything at all"}, context=_ctx(tmp_path / "nope"))
    assert out["status"] == "error" and "nope" in out["error"]
    empty = tmp_path / "empty"
    empty.mkdir()
    out = graph.invoke({"query": "anything at all"}, context=_ctx(empty))
    assert out["status"] == "error" and "no documents" in out["error"]


def test_context_as_dict_and_defaults(examples: Path) -> None:
    out = graph.invoke({"query": "Who approves expense reports?"}, context={"corpus": [str(examples)]})
    assert out["status"] in {"answered", "insufficient"}
    assert graph.name == "evident"


class _ListRetriever(BaseRetriever):
    docs: list[Document]
    fail: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self.fail:
            raise ConnectionError("wiki is down")
        return self.docs


POLICY = (
    "Home › Policies › Travel | Edit | History\n\n"
    "# Travel policy\n\n"
    "Employees must book flights through the TravelDesk portal at least 14 days before departure. "
    "Business class is allowed only for flights longer than 8 hours.\n\n"
    "Was this page helpful? Yes | No\n"
)


def test_any_langchain_retriever_and_glossary() -> None:
    g = build_graph(retriever=_ListRetriever(docs=[
        Document(page_content=POLICY, metadata={"url": "https://wiki.example/travel", "title": "Travel policy"}),
    ]))
    out = g.invoke(
        {"query": "How early must employees book flights through the TravelDesk portal?"},
        context=EvidentContext(glossary={"traveldesk": "TravelDesk™"}),
    )
    assert out["status"] == "answered"
    assert "TravelDesk™" in out["answer"]
    assert out["citations"][0]["quote"].startswith("Employees must book flights")
    assert "TravelDesk™" not in out["citations"][0]["quote"]  # quotes stay source text
    _check_grounded(out)


def test_failing_source_degrades_instead_of_crashing() -> None:
    g = build_graph(retriever=_ListRetriever(docs=[], fail=True))
    out = g.invoke({"query": "How early must flights be booked?"})
    assert out["status"] == "degraded"
    assert out["answer"] == INSUFFICIENT_ANSWER
    assert out["source_errors"][0]["message"].endswith("wiki is down")


def test_drifted_and_invented_passages_never_reach_the_answer() -> None:
    """Drive align → generate → verify → postprocess with a hostile extractor's passages."""
    from evident.models import SourceDocument
    from evident.nodes.align import align
    from evident.nodes.generate import generate
    from evident.nodes.postprocess import postprocess
    from evident.nodes.verify import verify

    docs = [
        SourceDocument(url="https://wiki.example/travel", content=POLICY),
        SourceDocument(url="https://wiki.example/remote", content="Remote work is allowed up to three days per week."),
    ]
    state: dict[str, Any] = {
        "query": "How early must flights be booked and is business class allowed?",
        "documents": docs,
        "passages": [
            {"passage_id": "1", "url": "https://evil.example/x",
             "content": "Employees must book flights through the TravelDesk portal at least 14 days before departure."},
            {"passage_id": "2", "url": "https://wiki.example/travel",
             "content": "Business class is allowed only for flights longer than 6 hours and for all directors."},
            {"passage_id": "3", "url": "https://wiki.example/travel",
             "content": "First class upgrades are reimbursed for every employee on request."},
        ],
    }
    runtime = Runtime(context=EvidentContext())
    for node in (align, generate, verify, postprocess):
        state.update(node(state, runtime))
    actions = [d.action for d in state["alignment"]]
    assert actions == ["relinked", "truncated", "dropped"]
    assert "evil.example" not in state["answer"]
    assert "6 hours" not in state["answer"] and "directors" not in state["answer"]
    assert "First class" not in state["answer"]
    for c in state["citations"]:
        assert c.url == "https://wiki.example/travel"
        assert "6 hours" not in c.quote


def test_a_sentence_two_retrieved_pages_hold_cites_both() -> None:
    # Rule 32: the answer is the same, but it cites every retrieved page that says it word for word.
    answer = "Each page of the online application times out after 25 minutes without activity."
    g = build_graph(retriever=_ListRetriever(docs=[
        Document(page_content=f"Apply online\n\n{answer} Save your work often.",
                 metadata={"url": "https://a.example/apply", "title": "Apply online"}),
        Document(page_content=f"How the estimator works\n\nThe estimator uses your earnings record.\n\n{answer}",
                 metadata={"url": "https://a.example/estimator", "title": "Estimator"}),
    ]))
    out = g.invoke({"query": "How long before a page of the online application times out?"},
                   context=EvidentContext(max_passages=1))
    assert out["status"] == "answered"
    assert f"{answer} [https://a.example/apply][https://a.example/estimator]" in out["answer"]
    assert {c["url"] for c in out["citations"] if c["quote"] == answer} == {"https://a.example/apply",
                                                                           "https://a.example/estimator"}
    _check_grounded(out)
