"""Embeddings from any `/v1/embeddings` server (OpenAI, vLLM, llama.cpp, TEI, Ollama) through
langchain-openai's `OpenAIEmbeddings`, with every failure turned into an `EmbeddingsFailure`.

Texts go out as strings (`check_embedding_ctx_length=False`): the client would otherwise cut them
into tiktoken ids, which servers other than OpenAI's do not accept and whose tables tiktoken
downloads on first use. The client's own retries are off: a failed call makes the query `degraded`
and it goes on by words, which is better than a query that waits through retries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from evident.embeddings.failures import EmbeddingsFailure, EmbeddingsUnavailable
from evident.settings import environment_value

if TYPE_CHECKING:
    from langchain_openai import OpenAIEmbeddings

    from evident.embeddings.resolve import EmbeddingsSettings

# Local servers ignore the key, but the client refuses to start without one.
PLACEHOLDER_KEY = "not-needed"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ServedEmbeddings(Embeddings):
    """A `/v1/embeddings` client whose failures are `EmbeddingsFailure`s (timeout, unreachable, HTTP
    status, malformed reply), sync and async."""

    def __init__(self, client: OpenAIEmbeddings, settings: EmbeddingsSettings) -> None:
        self.client = client
        self.settings = settings

    @property
    def model_id(self) -> str:
        dims = f"d{self.settings.dimensions}" if self.settings.dimensions else "d-default"
        return f"openai:{self.settings.model}:{dims}:{self.settings.base_url or DEFAULT_BASE_URL}"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            return self.client.embed_documents(texts)
        except Exception as exc:
            raise as_failure(exc, self.settings) from exc

    def embed_query(self, text: str) -> list[float]:
        try:
            return self.client.embed_query(text)
        except Exception as exc:
            raise as_failure(exc, self.settings) from exc

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self.client.aembed_documents(texts)
        except Exception as exc:
            raise as_failure(exc, self.settings) from exc

    async def aembed_query(self, text: str) -> list[float]:
        try:
            return await self.client.aembed_query(text)
        except Exception as exc:
            raise as_failure(exc, self.settings) from exc


def as_failure(exc: BaseException, settings: EmbeddingsSettings) -> EmbeddingsFailure:
    """The typed failure of one call; the message names the server, never the key."""
    # start-up time: the openai client (~0.4 s) loads only when a served embeddings call failed
    import openai

    where = settings.base_url or DEFAULT_BASE_URL
    if isinstance(exc, EmbeddingsFailure):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return EmbeddingsFailure("timeout", f"the embeddings server at {where} did not answer within "
                                 f"{settings.timeout_s:g} s")
    if isinstance(exc, openai.APIConnectionError):
        return EmbeddingsFailure("unreachable", f"cannot reach the embeddings server at {where}: {exc}")
    if isinstance(exc, openai.APIStatusError):
        return EmbeddingsFailure("http", f"the embeddings server at {where} answered HTTP {exc.status_code}",
                                 status=exc.status_code)
    return EmbeddingsFailure("reply", f"the embeddings server at {where} gave an unusable reply: "
                             f"{type(exc).__name__}: {exc}")


def openai_embeddings(settings: EmbeddingsSettings) -> ServedEmbeddings:
    """The client for `settings` (provider "openai"); `EmbeddingsUnavailable` when it cannot be built."""
    if not settings.model:
        raise EmbeddingsUnavailable("embeddings provider 'openai' needs a model: set EVIDENT_EMBEDDINGS_MODEL "
                                    "(or `model` in [embeddings])")
    key = environment_value(settings.api_key_env) or ""
    if not key:
        if not settings.base_url:
            raise EmbeddingsUnavailable(f"no API key for the embeddings: set {settings.api_key_env} "
                                        "(or EVIDENT_EMBEDDINGS_BASE_URL for a local server)")
        key = PLACEHOLDER_KEY
    try:
        # start-up time: langchain_openai (~0.8 s, with openai) loads only for provider "openai"
        from langchain_openai import OpenAIEmbeddings
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EmbeddingsUnavailable(f"langchain-openai is not installed: {exc}") from None
    kwargs: dict[str, Any] = dict(model=settings.model, api_key=key, timeout=settings.timeout_s, max_retries=0,
                                  chunk_size=settings.batch_size, check_embedding_ctx_length=False)
    if settings.base_url:
        kwargs["base_url"] = settings.base_url
    if settings.dimensions:
        kwargs["dimensions"] = settings.dimensions
    try:
        client = OpenAIEmbeddings(**kwargs)
    except Exception as exc:
        raise EmbeddingsUnavailable(f"cannot create the embeddings client: {exc}") from None
    return ServedEmbeddings(client, settings)
