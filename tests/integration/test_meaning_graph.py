"""The graph with embeddings on, end to end: the real local model over the examples, and an OpenAI-style
embeddings server on loopback that answers, fails or stalls (the query degrades, it never crashes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evident.context import EvidentContext
from evident.embeddings.meaning import SEMANTIC_SCORE
from evident.graph import build_graph, graph
from evident.models import INSUFFICIENT_ANSWER
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.embeddings

QUESTIONS = {q["id"]: q for q in map(json.loads, (Path(__file__).parents[2] / "examples" / "questions.jsonl")
                                     .read_text().splitlines())}


def _ask(corpus: Path, query: str, **settings: Any) -> dict[str, Any]:
    return graph.invoke({"query": query}, context=EvidentContext(corpus=[str(corpus)], **settings))


def _cited(out: dict[str, Any]) -> list[str]:
    return [c["url"] for c in out["citations"]]


def test_q34_is_answered_from_the_sentence_words_alone_cannot_reach(examples: Path, tmp_path: Path) -> None:
    q = QUESTIONS["q34"]  # lost laptop / tell / how quickly  vs  device / reported / within one hour
    words = _ask(examples, q["query"], embeddings="none", index_path=str(tmp_path / "words.sqlite3"))
    hybrid = _ask(examples, q["query"], index_path=str(tmp_path / "hybrid.sqlite3"))
    assert not any(e in words["answer"] for e in q["gold_evidence"])
    assert any(e in hybrid["answer"] for e in q["gold_evidence"]), hybrid["answer"]
    assert hybrid["status"] == "answered" and hybrid["notes"] == []
    assert set(_cited(hybrid)) & set(q["gold_urls"])
    assert all(SEMANTIC_SCORE in d["metadata"] for d in hybrid["documents"])
    assert not any(SEMANTIC_SCORE in d["metadata"] for d in words["documents"])


def test_an_unanswerable_question_still_abstains(examples: Path) -> None:
    out = _ask(examples, "What is the password for the guest Wi-Fi in the Paris office?")
    assert out["answer"] == INSUFFICIENT_ANSWER or "Paris" not in out["answer"]


def _openai(server: OpenAIServer, **extra: Any) -> dict[str, Any]:
    return {"embeddings": "openai", "embeddings_model": "embedder-7", "embeddings_base_url": server.base_url,
            "embeddings_api_key_env": "EVIDENT_TEST_NO_SUCH_KEY", **extra}


def test_an_embeddings_server_ranks_the_index_by_meaning(examples: Path, tmp_path: Path) -> None:
    with OpenAIServer() as server:
        out = _ask(examples, QUESTIONS["q01"]["query"], index_path=str(tmp_path / "i.sqlite3"), **_openai(server))
        assert out["status"] == "answered"
        assert all(SEMANTIC_SCORE in d["metadata"] for d in out["documents"])
        assert len(server.embedding_requests) > 1  # the index's windows, then the query


@pytest.mark.parametrize("failure", [{"embeddings_status": 503}, {"embeddings_delay_s": 3.0}])
def test_an_embeddings_server_that_fails_degrades_the_answer(
    examples: Path, tmp_path: Path, failure: dict[str, Any]
) -> None:
    q = QUESTIONS["q01"]
    with OpenAIServer(**failure) as server:
        out = _ask(examples, q["query"], index_path=str(tmp_path / "i.sqlite3"),
                   **_openai(server, embeddings_timeout_s=0.5))
    assert out["status"] == "degraded"
    assert [e["source"] for e in out["source_errors"]] == ["embeddings"]
    assert "ranked by words only" in out["source_errors"][0]["message"]
    assert out["citations"] and out["answer"] != INSUFFICIENT_ANSWER  # the words still answer
    assert not any(SEMANTIC_SCORE in d["metadata"] for d in out["documents"])


def test_a_server_that_fails_while_embedding_the_index_is_reported_and_the_words_answer(
    examples: Path, tmp_path: Path
) -> None:
    calls = {"n": 0}

    with OpenAIServer() as server:
        settings = _openai(server)

        def embeddings_for(ctx: EvidentContext) -> Any:
            from evident.embeddings import GraphEmbeddings

            resolved = GraphEmbeddings().resolve(ctx.model_copy(update=settings))
            inner = resolved.embeddings
            assert inner is not None

            class BreaksOnDocuments:
                model_id = "test:breaks-on-documents"

                def embed_query(self, text: str) -> list[float]:
                    return inner.embed_query(text)

                def embed_documents(self, texts: list[str]) -> list[list[float]]:
                    from evident.embeddings import EmbeddingsFailure

                    calls["n"] += 1
                    raise EmbeddingsFailure("unreachable", "the embeddings server went away")

            return BreaksOnDocuments()

        out = build_graph(embeddings=embeddings_for).invoke(
            {"query": QUESTIONS["q01"]["query"]},
            context=EvidentContext(corpus=[str(examples)], index_path=str(tmp_path / "i.sqlite3")),
        )
    assert calls["n"] >= 1
    assert out["status"] == "degraded"
    assert any(e["source"] == "embeddings" and "source" in e["message"] for e in out["source_errors"])
    assert out["citations"]


def test_a_model_file_that_fails_its_sha256_leaves_a_note_and_the_words_answer(
    examples: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the pinned model")
    out = _ask(examples, QUESTIONS["q01"]["query"], embeddings="local", embeddings_model_file=str(fake))
    assert out["status"] == "answered" and out["citations"]
    assert len(out["notes"]) == 1 and out["notes"][0].startswith("embeddings: off (")
    assert "model.onnx" in out["notes"][0] and "sha256" in out["notes"][0]


def test_the_served_path_ranks_by_meaning_as_invoke_does(examples: Path) -> None:
    # A server runs the graph with `ainvoke`: the query's meaning goes through the asyncio retrieval
    # (and the re-ranking in a thread), and must give the answer `invoke` gives.
    q = QUESTIONS["q34"]["query"]
    ctx = EvidentContext(corpus=[str(examples)])
    served = asyncio.run(graph.ainvoke({"query": q}, context=ctx))
    assert served["status"] == "answered" and served["notes"] == []
    assert all(SEMANTIC_SCORE in d["metadata"] for d in served["documents"])
    assert served["answer"] == graph.invoke({"query": q}, context=ctx)["answer"]
