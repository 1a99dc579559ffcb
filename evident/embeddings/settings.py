"""The embeddings settings of a run, resolved from `EvidentContext` (where evident.toml's `[embeddings]`
section and the `EVIDENT_EMBEDDINGS*` environment variables land; docs/embeddings.md).

They are deployment settings: `RequestSettings` (evident/context.py) does not list them, so a served
request cannot choose a model, a server or a file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from evident.context import EmbeddingsProvider, EvidentContext

Provider = EmbeddingsProvider | Literal["custom"]


class EmbeddingsSettings(BaseModel):
    """What the embeddings are built from. `provider=None` means the default: local when installed."""

    model_config = ConfigDict(frozen=True)

    provider: EmbeddingsProvider | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    dimensions: int | None = None
    timeout_s: float = 10.0
    batch_size: int = 32
    model_file: str | None = None
    tokenizer_file: str | None = None
    threads: int | None = None  # None: the cores this process may use (`local.available_cores`)

    @classmethod
    def from_context(cls, ctx: EvidentContext) -> EmbeddingsSettings:
        return cls(provider=ctx.embeddings, model=ctx.embeddings_model, base_url=ctx.embeddings_base_url,
                   api_key_env=ctx.embeddings_api_key_env, dimensions=ctx.embeddings_dimensions,
                   timeout_s=ctx.embeddings_timeout_s, batch_size=ctx.embeddings_batch_size,
                   model_file=ctx.embeddings_model_file, tokenizer_file=ctx.embeddings_tokenizer_file,
                   threads=ctx.embeddings_threads)
