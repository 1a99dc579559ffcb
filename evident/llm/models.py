"""Chat models for the LLM path: which model, created when first needed, called with retries.

Nothing here runs at import time: `langchain_openai` is imported and a `ChatOpenAI` built only
when a query in LLM mode first needs one (its constructor raises without an API key, and importing
it costs about a second). Models are cached per settings, so their HTTP connection pools are reused
across queries.

Retries are ours, not the SDK's (the client is built with `max_retries=0`): HTTP 429, 5xx and
connection failures are retried with exponential backoff, honouring `Retry-After` up to the cap;
timeouts are not retried, because a stalled server usually stays stalled and every retry would
add a full timeout to the user's wait. Every other failure is turned into a `ModelFailure`, which
the nodes record in `model_errors` before answering offline.

Servers differ (docs/llm.md has the table). An output cap is always sent: langchain-openai writes it
as `max_completion_tokens`, which llama.cpp-family servers ignore, so for any base URL other than
OpenAI's it goes out as `max_tokens` too. Requests to one server are limited to
`model_concurrency` in flight (`server_slot`): the rest queue here, so each request's timeout
counts from the moment it is sent, not from when a one-slot server gets round to it.
"""

from __future__ import annotations

import email.utils
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, SecretStr

from evident.context import EvidentContext
from evident.models import SourceError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

T = TypeVar("T")
Purpose = Literal["extract", "generate"]
FailureKind = Literal["timeout", "error", "config", "model"]

# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key, but the client
# refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"
_CACHE_SIZE = 16
# Output caps when `model_max_tokens` is not set: an answer is a paragraph or a short list; an
# extraction reply repeats its passages verbatim, so it gets more room.
DEFAULT_REPLY_TOKENS: dict[str, int] = {"generate": 1024, "extract": 2048}
DEFAULT_CONCURRENCY = 2  # a local server that does not say how many slots it has
OPENAI_CONCURRENCY = 4
_OPENAI_HOSTS = ("api.openai.com",)


def is_openai(base_url: str | None) -> bool:
    """OpenAI's own API (no base URL, or its host): the only server that needs no `max_tokens` twin."""
    return not base_url or any(h in base_url for h in _OPENAI_HOSTS)


def resolved_base_url(ctx: EvidentContext) -> str | None:
    return ctx.base_url or os.environ.get("OPENAI_BASE_URL") or None


def reply_cap(ctx: EvidentContext, purpose: "Purpose") -> int:
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
    def from_context(cls, ctx: EvidentContext) -> "ModelSettings":
        if not ctx.model:
            raise ModelFailure("config", "no model is configured: set EVIDENT_MODEL (or `model` in evident.toml)")
        base_url = ctx.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = ctx.api_key.get_secret_value() if ctx.api_key else os.environ.get(ctx.api_key_env, "")
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


class ModelFailure(Exception):
    """A model step that could not produce usable output; the node answers that step offline."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message

    def to_error(self, source: str, step: str, fallback: str) -> SourceError:
        return SourceError(source=source, kind=self.kind, message=f"{step}: {self.message}; {fallback}")


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

    def get(self, ctx: EvidentContext, purpose: Purpose) -> "BaseChatModel":
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


def _build_chat_openai(settings: ModelSettings, purpose: Purpose) -> "BaseChatModel":
    try:
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


# -- retries --------------------------------------------------------------------------------------


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a failed model request, if it got that far."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_timeout(exc: BaseException) -> bool:
    import httpx
    from langchain_core.exceptions import ModelTimeoutError

    try:
        import openai

        openai_timeout: tuple[type[BaseException], ...] = (openai.APITimeoutError,)
    except ImportError:  # pragma: no cover
        openai_timeout = ()
    return isinstance(exc, (TimeoutError, httpx.TimeoutException, ModelTimeoutError, *openai_timeout))


def is_retryable(exc: BaseException) -> bool:
    """HTTP 429, 5xx and connection failures; never a timeout (see the module docstring)."""
    if is_timeout(exc):
        return False
    from langchain_core.exceptions import ModelError

    if isinstance(exc, ModelError) and exc.is_retryable:
        return True
    status = http_status(exc)
    if status is not None:
        return status == 429 or status >= 500
    try:
        import openai

        return isinstance(exc, openai.APIConnectionError)
    except ImportError:  # pragma: no cover
        return False


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def backoff_delay(attempt: int, ctx: EvidentContext, exc: BaseException | None = None) -> float:
    """Delay before retry number `attempt + 1`: the server's Retry-After, else exponential; capped."""
    hinted = _retry_after(exc) if exc is not None else None
    delay = hinted if hinted is not None else ctx.model_backoff_s * (2**attempt)
    return min(delay, ctx.model_backoff_max_s)


def call_with_retries(
    call: Callable[[], T], ctx: EvidentContext, *, sleep: Callable[[float], None] = time.sleep,
    final: Callable[[BaseException], bool] | None = None,
) -> T:
    """`call()`, retried on retryable failures; `final(exc)` True makes a failure final at once."""
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if attempt >= ctx.model_max_retries or not is_retryable(exc) or (final is not None and final(exc)):
                raise
            sleep(backoff_delay(attempt, ctx, exc))
            attempt += 1


# -- failures -------------------------------------------------------------------------------------


def describe_failure(exc: BaseException, ctx: EvidentContext) -> ModelFailure:
    """A model exception as a `ModelFailure` whose message a user can act on."""
    if isinstance(exc, ModelFailure):
        return exc
    if is_timeout(exc):
        return ModelFailure("timeout", f"the model did not answer within {ctx.model_timeout_s:g} s")
    from langchain_core.exceptions import ModelRefusalError

    if isinstance(exc, ModelRefusalError) or type(exc).__name__ == "ContentFilterFinishReasonError":
        return ModelFailure("model", f"the model refused: {exc}")
    status = http_status(exc)
    message = server_message(exc)
    if status == 429:
        return ModelFailure("model", f"rate limited (HTTP 429) after {ctx.model_max_retries} retries: {message}")
    if status is not None:
        tail = f" after {ctx.model_max_retries} retries" if status >= 500 else ""
        return ModelFailure("model", f"HTTP {status}{tail}: {message}")
    if is_retryable(exc):
        return ModelFailure("model", f"cannot reach the model after {ctx.model_max_retries} retries: {message}")
    return ModelFailure("model", f"{type(exc).__name__}: {message}")


def refusal_of(message: Any) -> str | None:
    """The refusal text of a chat message, if the model declined (an OpenAI `refusal` field)."""
    refusal = (getattr(message, "additional_kwargs", None) or {}).get("refusal")
    if refusal:
        return str(refusal)
    finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    if finish == "content_filter":
        return "the output was stopped by a content filter"
    return None


def text_of(message: Any) -> str:
    """The text of a chat message, whatever content shape its provider used."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", "")) for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type", "text") == "text")
        )
    return "" if content is None else str(content)


# -- servers: their messages and their slots ---------------------------------------------------

_BRIEF_CHARS = 300
_TRACEBACK = "Traceback (most recent call last)"
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')


def brief_error(message: str) -> str:
    """A server's error message without its traceback: the exception line, at most 300 characters."""
    text = str(message).strip()
    if _TRACEBACK in text:
        before = text.split(_TRACEBACK, 1)[0].strip()
        lines = [ln.strip() for ln in text.split(_TRACEBACK, 1)[1].splitlines() if ln.strip()]
        # The message is the last exception line and what follows it (a validation error's details).
        starts = [i for i, ln in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
        text = " ".join(lines[starts[-1]:] if starts else lines[-1:]) or before
    else:
        # llama-cpp-python appends the stack frames after the message: keep what comes before them.
        lines = text.splitlines()
        frame = next((i for i, ln in enumerate(lines) if _FRAME.match(ln)), None)
        if frame:
            text = "\n".join(lines[:frame])
    text = " ".join(text.split())
    return text if len(text) <= _BRIEF_CHARS else text[: _BRIEF_CHARS - 1] + "…"


def server_message(exc: BaseException) -> str:
    """What the server said, briefly: the `error.message` (or `detail`) of its JSON error body when it
    sent one (the SDK's own message embeds the whole body as a Python repr), else the exception text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        said = error.get("message") or error.get("detail") if isinstance(error, dict) else error
        if isinstance(said, str) and said.strip():
            return brief_error(said)
    return brief_error(getattr(exc, "message", None) or str(exc) or type(exc).__name__)


_slots_lock = threading.Lock()
_slots: dict[str, tuple[int, threading.BoundedSemaphore]] = {}
_probed_slots: dict[str, int | None] = {}


def server_root(base_url: str) -> str:
    """The server's root URL: llama.cpp serves /props and /health beside /v1."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def probe_slots(base_url: str, timeout_s: float = 2.0) -> int | None:
    """The parallel slots a llama.cpp `llama-server` reports on /props (`total_slots`); None when the
    server does not say (llama-cpp-python, vLLM, Ollama, OpenAI...). One request per base URL per process."""
    with _slots_lock:
        if base_url in _probed_slots:
            return _probed_slots[base_url]
    found: int | None = None
    try:
        import httpx

        resp = httpx.get(server_root(base_url) + "/props", timeout=timeout_s)
        value = resp.json().get("total_slots") if resp.status_code == 200 else None
        found = int(value) if isinstance(value, int) and value > 0 else None
    except Exception:  # any answer but a slot count means "unknown"
        found = None
    with _slots_lock:
        _probed_slots[base_url] = found
    return found


def concurrency(ctx: EvidentContext, base_url: str | None) -> int:
    """Requests in flight to one server: the setting, else its reported slots, else a small default."""
    if ctx.model_concurrency:
        return ctx.model_concurrency
    if is_openai(base_url):
        return OPENAI_CONCURRENCY
    return probe_slots(base_url or "") or DEFAULT_CONCURRENCY


def model_base_url(model: Any, ctx: EvidentContext) -> str | None:
    """Where `model` sends its requests: an injected ChatOpenAI's own base URL, else the settings'."""
    return getattr(model, "openai_api_base", None) or resolved_base_url(ctx)


@contextmanager
def server_slot(ctx: EvidentContext, model: Any) -> Iterator[None]:
    """Hold one of the server's request slots for one request (module docstring). Keyed by base URL:
    every model and purpose on one server shares its slots."""
    base_url = model_base_url(model, ctx)
    if base_url is None and not ctx.model:
        yield  # an injected non-OpenAI chat model: nothing to queue for
        return
    key = base_url or "openai"
    limit = concurrency(ctx, base_url)
    with _slots_lock:
        found = _slots.get(key)
        if found is None or found[0] != limit:
            found = (limit, threading.BoundedSemaphore(limit))
            _slots[key] = found
    with found[1]:
        yield


DEFAULT_MODELS = Models()
"""The chat models of the default graph: built from each run's `EvidentContext`."""
