"""Run-time settings of a query (`context_schema` of the graph).

Precedence, lowest first: built-in defaults, `evident.toml` (path in `EVIDENT_CONFIG`, else
`./evident.toml` when present), environment variables, then explicit arguments / the context
passed to `graph.invoke(..., context=...)`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

PACKAGE_ROOT = Path(__file__).resolve().parent
# The bundled example corpus, when running from a source checkout (what `langgraph dev` does).
EXAMPLE_CORPUS = PACKAGE_ROOT.parent / "examples" / "corpus"


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names it."""


class EvidentContext(BaseModel):
    """Model, alignment, retrieval and output settings of one query."""

    model_config = ConfigDict(extra="forbid")

    # Model (any OpenAI-compatible server). No model configured => offline mode.
    model: str | None = Field(None, description="Chat model name (EVIDENT_MODEL).")
    base_url: str | None = Field(None, description="OpenAI-compatible base URL (OPENAI_BASE_URL).")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    temperature: float = 0.0
    mode: Literal["llm", "offline"] | None = Field(
        None, description="Forced mode; by default 'llm' when a model is configured, else 'offline'."
    )
    model_timeout_s: float = Field(60.0, gt=0, description="Per-request timeout of model calls (seconds).")
    api_key: SecretStr | None = Field(
        None, description="API key; prefer the environment variable named by api_key_env."
    )
    model_max_retries: int = Field(2, ge=0, description="Retries of a model call on HTTP 429/5xx.")
    model_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles per retry.")
    model_backoff_max_s: float = Field(8.0, ge=0, description="Cap of a retry delay (Retry-After too).")
    model_max_tokens: int | None = Field(None, ge=1, description="Output token cap of a model call.")
    structured_output: Literal["json_schema", "function_calling", "json_mode", "text"] = Field(
        "json_schema", description="First extraction method tried; later ones are fallbacks."
    )
    context_budget_tokens: int = Field(
        8000, ge=256, description="Document tokens per extraction call; more is split into batches."
    )
    max_extract_batches: int = Field(16, ge=1, description="Cap on parallel extraction calls per query.")
    token_counter: Literal["auto", "approx", "tiktoken"] = Field(
        "auto", description="How prompt tokens are counted (see docs/llm.md)."
    )
    chars_per_token: float = Field(4.0, gt=0, description="The approximate counter's characters per token.")
    sentence_threshold: float = Field(
        0.8, ge=0.0, le=1.0, description="Support a model-written sentence needs (see docs/llm.md)."
    )

    # Alignment (paper §3.3).
    ngram_n: int = Field(5, ge=1)
    threshold: float = Field(0.7, ge=0.0, le=1.0)
    drift: Literal["extended", "paper"] = "extended"
    bridge: int = Field(2, ge=0)
    unsupported: Literal["remove", "flag"] = "remove"

    # Retrieval.
    corpus: list[str] = Field(default_factory=list, description="Folders/JSONL files to search.")
    index_path: str | None = Field(None, description="Embedded index file (default: per corpus).")
    k: int = Field(8, ge=1, description="Documents asked from each source.")
    top_n: int = Field(8, ge=1, description="Documents kept after fusion.")
    retrieve_timeout_s: float = Field(15.0, gt=0)
    sources: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Federated sources ([[sources]] in evident.toml; see docs/sources.md). "
        "When set, they are searched instead of the default corpus (plus `corpus` if given).",
    )

    # Offline engine and output.
    max_passages: int = Field(6, ge=1)
    max_query_chars: int = Field(4000, ge=1)
    glossary: dict[str, str] = Field(default_factory=dict)

    @field_validator("corpus", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        if isinstance(v, (str, Path)):
            return [str(v)]
        return v

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_by_name(cls, v: Any) -> Any:
        # `[sources.wiki]` tables (name -> settings) as well as `[[sources]]` arrays.
        if isinstance(v, dict):
            return [{"name": name, **body} if isinstance(body, dict) else body for name, body in v.items()]
        return v

    @property
    def resolved_mode(self) -> Literal["llm", "offline"]:
        if self.mode:
            return self.mode
        return "llm" if self.model else "offline"

    def corpus_paths(self) -> list[str]:
        if self.corpus:
            return self.corpus
        return [str(EXAMPLE_CORPUS)] if EXAMPLE_CORPUS.exists() else []

    @classmethod
    def from_env(cls, config: str | Path | None = None, **overrides: Any) -> "EvidentContext":
        """Defaults < evident.toml < environment < `overrides` (None values are ignored)."""
        values: dict[str, Any] = {}
        values.update(file_settings(config))
        values.update(environment_settings())
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "settings"
            raise ConfigError(f"invalid setting {where}: {first['msg']}") from None


_ENV = {
    "EVIDENT_MODEL": "model",
    "OPENAI_BASE_URL": "base_url",
    "EVIDENT_MODE": "mode",
    "EVIDENT_NGRAM_N": "ngram_n",
    "EVIDENT_THRESHOLD": "threshold",
    "EVIDENT_TOP_N": "top_n",
    "EVIDENT_K": "k",
    "EVIDENT_INDEX": "index_path",
    "EVIDENT_MODEL_TIMEOUT": "model_timeout_s",
    "EVIDENT_MODEL_RETRIES": "model_max_retries",
    "EVIDENT_STRUCTURED_OUTPUT": "structured_output",
    "EVIDENT_CONTEXT_BUDGET": "context_budget_tokens",
    "EVIDENT_TOKEN_COUNTER": "token_counter",
}


# Short names accepted in the [model] section of evident.toml.
_MODEL_KEYS = {
    "name": "model", "timeout_s": "model_timeout_s", "max_retries": "model_max_retries",
    "backoff_s": "model_backoff_s", "backoff_max_s": "model_backoff_max_s", "max_tokens": "model_max_tokens",
}


def environment_settings() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for var, key in _ENV.items():
        value = os.environ.get(var)
        if value:
            out[key] = value
    corpus = os.environ.get("EVIDENT_CORPUS")
    if corpus:
        out["corpus"] = [p for p in corpus.split(os.pathsep) if p]
    return out


def file_settings(config: str | Path | None) -> dict[str, Any]:
    explicit = config is not None or "EVIDENT_CONFIG" in os.environ
    path = Path(config or os.environ.get("EVIDENT_CONFIG") or "evident.toml")
    if not path.exists():
        if explicit:
            raise ConfigError(f"{path}: config file not found")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    # Accept both a flat file and the sections the README documents.
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in {"model", "alignment", "retrieval", "output"}:
            names = _MODEL_KEYS if key == "model" else {}
            flat.update({names.get(k, k): v for k, v in value.items()})
        else:
            flat[key] = value
    if "corpus" in flat:
        base = path.resolve().parent
        paths = flat["corpus"] if isinstance(flat["corpus"], list) else [flat["corpus"]]
        flat["corpus"] = [str((base / p) if not Path(p).is_absolute() else Path(p)) for p in paths]
    if "sources" in flat:
        # Paths inside a source (local folders, index files) are relative to this file too.
        sources = EvidentContext._sources_by_name(flat["sources"])
        base_dir = str(path.resolve().parent)
        if isinstance(sources, list):
            flat["sources"] = [{"base_dir": base_dir, **s} if isinstance(s, dict) else s for s in sources]
    return flat
