"""Documents beyond the context budget: split into batches, extracted in parallel with LangGraph
`Send`, merged and de-duplicated."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.documents import Document

from evident.alignment.models import SourceDocument
from evident.connectors.base import to_source_document
from evident.graph import build_graph
from evident.llm.batching import approx_counter, plan_batches, split_document
from evident.llm.replies import read_extraction
from evident.models import Passage
from evident.nodes.extract import merge_passages
from evident.prompts.render import render_document
from tests.support.llm import (
    ListRetriever,
    check_grounded,
    echo_model,
    echo_responder,
    fake_context,
    llm_context,
    prompt_documents,
    server,
)
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

__all__ = ["server"]

TOPICS = ["security", "billing", "onboarding", "retention"]


def handbook(topic: str, sentences: int) -> str:
    paras = []
    for p in range(0, sentences, 5):
        paras.append(" ".join(
            f"Rule {i} of the {topic} handbook says that item {i} must be reviewed by team {i % 7} every quarter."
            for i in range(p + 1, min(p + 6, sentences + 1))
        ))
    return f"# The {topic} handbook\n\n" + "\n\n".join(paras) + "\n"


def long_corpus() -> list[Document]:
    sizes = [70, 20, 20, 20]  # the first is longer than the budget on its own
    return [
        Document(page_content=handbook(t, n), metadata={"url": f"https://wiki.example/{t}", "title": f"{t} handbook"})
        for t, n in zip(TOPICS, sizes, strict=True)
    ]


def test_long_corpus_is_extracted_in_parallel_batches_and_merged(server: OpenAIServer) -> None:
    budget = 1200
    docs = long_corpus()
    source = [to_source_document(d, source="ListRetriever") for d in docs]  # what retrieve produces
    plan = plan_batches(source, budget=budget, count=approx_counter(4.0), render=render_document, max_batches=16)
    assert 3 <= len(plan) <= 6, len(plan)  # the default thread pool runs up to 6 at once on 2 cores

    echo = echo_responder()

    def respond(request: ChatRequest) -> Reply:
        reply = echo(request)
        if request.kind != "extract":
            return reply
        items = json.loads(reply.content or "{}")["collected_passages"]
        first = items[0]
        # Typical model noise: the same passage twice (re-spaced), and a piece of it on its own.
        items += [{**first, "passage_id": "99", "content": "  " + first["content"].replace(" ", "  ")},
                  {**first, "passage_id": "98", "content": first["content"].split(" says ")[0]}]
        return Reply(content=json.dumps({"collected_passages": items}))

    server.respond_with(respond)
    server.require_parallel(len(plan))  # each request waits until all batches are in flight at once
    g = build_graph(retriever=ListRetriever(docs=docs))
    # As many requests in flight as batches: this server has the slots (the default would queue them).
    ctx = llm_context(server, context_budget_tokens=budget, token_counter="approx", top_n=8,
                      model_concurrency=len(plan))
    updates: list[str] = []
    final: dict[str, Any] = {}
    for mode, item in g.stream({"query": "Which team reviews the items of each handbook?"}, context=ctx,
                               stream_mode=["updates", "values"]):
        if mode == "updates":
            updates.extend(item)
        else:
            final = item

    # The fan-out: one Send task per batch, all in flight together (the barrier never broke).
    assert updates.count("extract_batch") == len(plan)
    assert len(server.of_kind("extract")) == len(plan)
    assert not server.barrier_broken and server.max_in_flight >= len(plan)
    # Every part of every document went to exactly one call.
    seen = [u for r in server.of_kind("extract") for u, _ in prompt_documents(r.text)]
    assert sorted(seen) == sorted(p.url for batch in plan for p in batch)
    assert seen.count("https://wiki.example/security") >= 2  # the long document was split

    # The merge: one passage per document part, duplicates and contained pieces gone, ids renumbered.
    passages = final["passages"]
    expected = sum(len(b) for b in plan)
    assert len(passages) == expected
    assert [p["passage_id"] for p in passages] == [f"p{i}" for i in range(1, expected + 1)]
    assert len({" ".join(p["content"].split()) for p in passages}) == expected
    assert final["extractions"] == []  # consumed by the merge
    assert final["status"] == "answered" and final["model_errors"] == []
    check_grounded(final)
    cited = {c["url"] for c in final["citations"]}
    assert cited == {d.metadata["url"] for d in docs}


def test_split_parts_are_exact_substrings_within_budget() -> None:
    doc = SourceDocument(url="https://x", content=handbook("security", 120))
    count = approx_counter(4.0)
    parts = split_document(doc, 300, count)
    assert len(parts) > 1
    assert "".join(p.content for p in parts) == doc.content  # nothing lost, nothing repeated
    for p in parts:
        assert count(p.content) <= 300
        assert doc.content[p.metadata["offset"]:].startswith(p.content)
    # Cuts fall on paragraph breaks when paragraphs fit.
    assert all(p.content.endswith("\n\n") or p is parts[-1] for p in parts)


def test_a_document_without_any_break_is_still_split() -> None:
    doc = SourceDocument(url="https://x", content="x" * 10_000)
    parts = split_document(doc, 500, approx_counter(4.0))
    assert "".join(p.content for p in parts) == doc.content and all(len(p.content) <= 2000 for p in parts)


def test_merge_keeps_first_occurrence_and_longer_passages() -> None:
    a = Passage(passage_id="1", url="https://x/", content="Alpha beta gamma delta.")
    b = Passage(passage_id="1", url="https://X", content="alpha  BETA gamma delta.")
    c = Passage(passage_id="2", url="https://x", content="beta gamma")
    d = Passage(passage_id="1", url="https://y", content="beta gamma")
    merged = merge_passages([[a, c], [b, d]])
    assert [(p.passage_id, p.url, p.content) for p in merged] == [
        ("p1", "https://x/", "Alpha beta gamma delta."), ("p2", "https://y", "beta gamma")]


def test_read_extraction_shapes() -> None:
    full = '{"collected_passages": [{"passage_id": "1", "url": "u", "content": "a b c"}]}'
    assert read_extraction(full).strict
    assert read_extraction(json.loads(full)).passages == [Passage(passage_id="1", url="u", content="a b c")]
    assert read_extraction('{"collected_passages": []}').passages == []
    assert read_extraction("").passages is None
    assert read_extraction("I cannot help with that.").passages is None
    listed = read_extraction('[{"text": "a b", "link": "u"}]').passages
    assert listed == [Passage(passage_id="1", url="u", content="a b")]
    cut = full[:-10]
    assert read_extraction(cut).passages is None  # nothing complete before the cut
    assert read_extraction(None).passages is None


def test_a_custom_token_counter_is_used_and_a_broken_one_does_not_fail_the_query() -> None:
    model = echo_model()
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    docs = long_corpus()
    out = build_graph(retriever=ListRetriever(docs=docs), token_counter=words, chat_model=model).invoke(
        {"query": "Which team reviews the items?"}, context=fake_context(context_budget_tokens=900))
    assert counted and out["status"] == "answered"
    assert len(model.of_kind("extract")) >= 2  # about 2,300 words: several 900-word batches

    def broken(text: str) -> int:
        raise RuntimeError("tokenizer not loaded")

    n = len(model.of_kind("extract"))
    out = build_graph(retriever=ListRetriever(docs=docs), token_counter=broken, chat_model=model).invoke(
        {"query": "Which team reviews the items?"}, context=fake_context())
    assert out["status"] == "answered" and out["model_errors"] == []
    assert len(model.of_kind("extract")) - n == len(docs)  # one batch per document
