"""The OpenAI provider through the real langchain-openai client against a scripted `/v1/embeddings`
server on loopback: success, an HTTP error, a stall past the timeout."""

from __future__ import annotations

import time

import numpy as np
import pytest

from evident.context import EvidentContext
from evident.embeddings import EmbeddingsFailure, GraphEmbeddings
from evident.embeddings.scorer import VectorCache
from tests.support.openai_server import OpenAIServer, bag_of_words

# The real resolution of the settings (conftest.py sets words only for unmarked tests).
pytestmark = pytest.mark.embeddings


def context(server: OpenAIServer, **extra: object) -> EvidentContext:
    return EvidentContext(embeddings="openai", embeddings_model="embedder-7", embeddings_base_url=server.base_url,
                          embeddings_api_key_env="EVIDENT_TEST_NO_SUCH_KEY", **extra)  # type: ignore[arg-type]


def test_the_configured_server_and_model_are_used() -> None:
    with OpenAIServer() as server:
        resolved = GraphEmbeddings().resolve(context(server, embeddings_batch_size=2))
        assert resolved.on and resolved.provider == "openai" and resolved.embeddings is not None
        assert resolved.model_id is not None and "embedder-7" in resolved.model_id
        texts = ["grace period after rotation", "expense reports within 30 days", "grace period rotation key"]
        vectors = resolved.embeddings.embed_documents(texts)
        assert np.allclose(vectors[0], bag_of_words(texts[0]), atol=1e-6)
        assert {r.body["model"] for r in server.embedding_requests} == {"embedder-7"}
        assert all(r.path == "/v1/embeddings" for r in server.embedding_requests)
        assert [len(r.inputs) for r in server.embedding_requests] == [2, 1]  # batch_size texts per call
        assert server.embedding_requests[0].headers["authorization"] == "Bearer not-needed"
        scorer = resolved.scorer
        assert scorer is not None
        scorer.cache = VectorCache()
        scores = scorer.similarities("grace period after a key rotation", texts)
        assert scores[0] > scores[1] and scores[2] > scores[1]


def test_dimensions_are_sent_when_set() -> None:
    with OpenAIServer() as server:
        resolved = GraphEmbeddings().resolve(context(server, embeddings_dimensions=8))
        assert resolved.embeddings is not None and len(resolved.embeddings.embed_query("a b c")) == 8
        assert server.embedding_requests[-1].body["dimensions"] == 8


def test_a_server_error_is_a_typed_failure() -> None:
    with OpenAIServer(embeddings_status=500) as server:
        resolved = GraphEmbeddings().resolve(context(server))
        assert resolved.embeddings is not None
        with pytest.raises(EmbeddingsFailure) as raised:
            resolved.embeddings.embed_query("anything")
        assert raised.value.kind == "http" and raised.value.status == 500
        assert server.base_url in raised.value.message
        assert len(server.embedding_requests) == 1  # no retries: the query goes on by words instead


def test_a_slow_server_times_out_as_a_typed_failure() -> None:
    with OpenAIServer(embeddings_delay_s=5.0) as server:
        resolved = GraphEmbeddings().resolve(context(server, embeddings_timeout_s=0.3))
        assert resolved.embeddings is not None
        started = time.monotonic()
        with pytest.raises(EmbeddingsFailure) as raised:
            resolved.embeddings.embed_documents(["anything"])
        assert raised.value.kind == "timeout" and time.monotonic() - started < 3.0
        assert "did not answer within 0.3 s" in raised.value.message


async def _aembed(resolved_embeddings: object) -> None:
    await resolved_embeddings.aembed_query("anything")  # type: ignore[attr-defined]


def test_an_unreachable_server_is_a_typed_failure_async_too() -> None:
    import asyncio

    ctx = EvidentContext(embeddings="openai", embeddings_model="m", embeddings_base_url="http://127.0.0.1:9/v1",
                         embeddings_timeout_s=2)
    resolved = GraphEmbeddings().resolve(ctx)
    with pytest.raises(EmbeddingsFailure) as raised:
        asyncio.run(_aembed(resolved.embeddings))
    assert raised.value.kind == "unreachable"


def test_no_model_name_is_words_only_with_the_reason() -> None:
    resolved = GraphEmbeddings().resolve(EvidentContext(embeddings="openai", embeddings_base_url="http://x/v1"))
    assert not resolved.on and resolved.fault and "EVIDENT_EMBEDDINGS_MODEL" in resolved.reason
