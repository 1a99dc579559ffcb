"""The embeddings settings of a run: the `embeddings*` settings of `EvidentContext` (where evident.toml's
`[embeddings]` section and the `EVIDENT_EMBEDDINGS*` environment variables land; docs/embeddings.md), as the
embeddings code reads them.

They are deployment settings: `RequestSettings` (evident/request_settings.py) does not list them, so a served
request cannot choose a model, a server or a file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from evident.context import EmbeddingsProvider, EvidentContext
from evident.settings import section_field

Provider = EmbeddingsProvider | Literal["custom"]


class EmbeddingsSettings(BaseModel):
    """What the embeddings are built from, named as in `[embeddings]`; a key left out has the setting's
    default in `EvidentContext`, where each is described. `provider=None` means the default: local when
    installed."""

    model_config = ConfigDict(frozen=True)

    provider: EmbeddingsProvider | None
    model: str | None
    base_url: str | None
    api_key_env: str
    dimensions: int | None
    timeout_s: float
    batch_size: int
    model_file: str | None
    tokenizer_file: str | None
    threads: int | None  # None: the cores this process may use (`local.available_cores`)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = EvidentContext.model_fields
        return {**{key: fields[section_field("embeddings", key)].get_default(call_default_factory=True)
                   for key in cls.model_fields}, **data}

    @classmethod
    def from_context(cls, ctx: EvidentContext) -> EmbeddingsSettings:
        return cls(**{key: getattr(ctx, section_field("embeddings", key)) for key in cls.model_fields})
