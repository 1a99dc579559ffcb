"""Chat models for the LLM path: which model, with which settings, created when first needed.

Nothing here runs at import time: `langchain_openai` is imported and a `ChatOpenAI` built only
when a query in LLM mode first needs one (its constructor raises without an API key, and importing
it costs about a second). Models are cached per settings, so their HTTP connection pools are reused
across queries. The client's own retries are off (`max_retries=0`): `llm/failures.py` retries.

An output cap is always sent: langchain-openai writes it as `max_completion_tokens`, which
llama.cpp-family servers ignore, so for any base URL other than OpenAI's it goes out as
`max_tokens` too (`llm/servers.py` says which servers are OpenAI's and how many requests each takes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from evident.context import EvidentContext
from evident.llm.failures import ModelFailure
from evident.llm.servers import is_openai, resolved_base_url
from evident.settings import environment_value

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

Purpose = Literal["extract", "generate"]

# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key, but the client
# refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"
_CACHE_SIZE = 16
# Output caps when `model_max_tokens` is not set: an answer is a paragraph or a short list; an
# extraction reply repeats its passages verbatim, so it gets more room.
DEFAULT_REPLY_TOKENS: dict[str, int] = {"generate": 1024, "extract": 2048}


def reply_cap(ctx: EvidentContext, purpose: Purpose) -> int:
    """The output-token cap of a `purpose` call: the setting, else the default; never more than a
    third of a known context window (the prompt needs the rest)."""
    cap = ctx.model_max_tokens or DEFAULT_REPLY_TOKENS[purpose]
    if ctx.context_window:
        cap = min(cap, max(64, ctx.context_window // 3))
    return cap


class ModelSettings(BaseModel):
    """What a chat model is built from, resolved from `EvidentContext` and the environment."""

    model_config = ConfigDict(frozen=True)

    model: str
    base_url: str | None = None
    api_key: SecretStr
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_tokens: int | None = None
    extract_max_tokens: int | None = None

    @classmethod
    def from_context(cls, ctx: EvidentContext) -> ModelSettings:
        if not ctx.model:
            raise ModelFailure("config", "no model is configured: set EVIDENT_MODEL (or `model` in evident.toml)")
        base_url = resolved_base_url(ctx)
        key = ctx.api_key.get_secret_value() if ctx.api_key else (environment_value(ctx.api_key_env) or "")
        if not key:
            if not base_url:
                raise ModelFailure(
                    "config", f"no API key: set {ctx.api_key_env} (or OPENAI_BASE_URL for a local server)"
                )
            key = LOCAL_PLACEHOLDER_KEY
        return cls(model=ctx.model, base_url=base_url, api_key=SecretStr(key), temperature=ctx.temperature,
                   timeout_s=ctx.model_timeout_s, max_tokens=reply_cap(ctx, "generate"),
                   extract_max_tokens=reply_cap(ctx, "extract"))

    def cap(self, purpose: Purpose) -> int | None:
        return self.extract_max_tokens if purpose == "extract" else self.max_tokens

    def cache_key(self, purpose: Purpose) -> tuple[Any, ...]:
        return (self.model, self.base_url, self.api_key.get_secret_value(), self.temperature, self.timeout_s,
                self.cap(purpose), purpose)


class Models:
    """Where the graph gets its chat models: built from the settings, or injected by the caller.

    `build_graph(chat_model=...)` injects any LangChain chat model (or a factory taking the run's
    `EvidentContext`); the LLM path is then on unless the context says `mode="offline"`.
    """

    def __init__(self, chat_model: Any = None) -> None:
        self._injected = chat_model
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], BaseChatModel] = OrderedDict()

    def enabled(self, ctx: EvidentContext) -> bool:
        if ctx.mode == "offline":
            return False
        return self._injected is not None or ctx.resolved_mode == "llm"

    def name(self, ctx: EvidentContext) -> str:
        """How `model_errors` names the model."""
        if ctx.model:
            return ctx.model
        injected = self._injected
        return str(getattr(injected, "model_name", None) or getattr(injected, "model", None) or "chat_model")

    def get(self, ctx: EvidentContext, purpose: Purpose) -> BaseChatModel:
        """The chat model for one step; raises `ModelFailure("config", ...)` when none can be built."""
        if self._injected is not None:
            chosen: BaseChatModel = self._injected if hasattr(self._injected, "invoke") else self._injected(ctx)
            # Extraction output is JSON for the pipeline, not tokens for the user to watch.
            return chosen.model_copy(update={"disable_streaming": True}) if purpose == "extract" else chosen
        settings = ModelSettings.from_context(ctx)
        key = settings.cache_key(purpose)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        model = _build_chat_openai(settings, purpose)
        with self._lock:
            self._cache[key] = model
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return model


def _build_chat_openai(settings: ModelSettings, purpose: Purpose) -> BaseChatModel:
    try:
        # start-up time: langchain_openai (~0.8 s, with openai) loads with the first model, never on the offline path
        from langchain_openai import ChatOpenAI
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ModelFailure("config", f"langchain-openai is not installed: {exc}") from None
    kwargs: dict[str, Any] = dict(
        model=settings.model, base_url=settings.base_url, api_key=settings.api_key,
        temperature=settings.temperature, timeout=settings.timeout_s, max_retries=0,
        disable_streaming=purpose == "extract",
    )
    cap = settings.cap(purpose)
    if cap:
        kwargs["max_tokens"] = cap  # sent as max_completion_tokens
        if not is_openai(settings.base_url):
            # llama.cpp, llama-cpp-python, Ollama and older vLLM read only `max_tokens`.
            kwargs["extra_body"] = {"max_tokens": cap}
    try:
        return ChatOpenAI(**kwargs)
    except Exception as exc:  # invalid settings: report, never crash the query
        raise ModelFailure("config", f"cannot create the chat model: {exc}") from None


DEFAULT_MODELS = Models()
"""The chat models of the default graph: built from each run's `EvidentContext`."""
