"""When a model call fails: which failures are retried, how long to wait, and what the user is told.

Retries are ours, not the SDK's (the client is built with `max_retries=0`): HTTP 429, 5xx and
connection failures are retried with exponential backoff, honouring `Retry-After` up to the cap;
timeouts are not retried, because a stalled server usually stays stalled and every retry would
add a full timeout to the user's wait. The SDK's `max_retries` would retry timeouts too, retry a
request shape the server rejects with HTTP 500 before the extraction ladder can step down, wait
out a Retry-After of up to two minutes whatever `model_backoff_max_s` says, and wait while
holding the server's request slot (`llm/servers.py`). LangChain's `.with_retry` takes our
predicate and backoff but reads no `Retry-After`. Every other failure is
turned into a `ModelFailure`, which the nodes record in `model_errors` before answering offline. A
server's error message reaches the user without its traceback (`server_message`).
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable
from typing import Literal, TypeVar

import httpx
from langchain_core.exceptions import ModelError, ModelRefusalError, ModelTimeoutError

from evident.context import EvidentContext
from evident.models import SourceError

T = TypeVar("T")
FailureKind = Literal["timeout", "error", "config", "model"]


class ModelFailure(Exception):
    """A model step that could not produce usable output; the node answers that step offline."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message

    def to_error(self, source: str, step: str, fallback: str) -> SourceError:
        return SourceError(source=source, kind=self.kind, message=f"{step}: {self.message}; {fallback}")


# -- retries --------------------------------------------------------------------------------------


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a failed model request, if it got that far."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_timeout(exc: BaseException) -> bool:
    try:
        # start-up time: the openai client (~0.4 s) comes with langchain_openai; the offline path never loads it
        import openai

        openai_timeout: tuple[type[BaseException], ...] = (openai.APITimeoutError,)
    except ImportError:  # pragma: no cover
        openai_timeout = ()
    return isinstance(exc, (TimeoutError, httpx.TimeoutException, ModelTimeoutError, *openai_timeout))


def is_retryable(exc: BaseException) -> bool:
    """HTTP 429, 5xx and connection failures; never a timeout (see the module docstring)."""
    if is_timeout(exc):
        return False
    if isinstance(exc, ModelError) and exc.is_retryable:
        return True
    status = http_status(exc)
    if status is not None:
        return status == 429 or status >= 500
    try:
        # start-up time: the openai client (~0.4 s) comes with langchain_openai; the offline path never loads it
        import openai

        return isinstance(exc, openai.APIConnectionError)
    except ImportError:  # pragma: no cover
        return False


def _retry_after(exc: BaseException) -> float | None:
    """The server's wait in seconds (`retry-after-ms`, else `retry-after` in seconds or as an HTTP date);
    None when it sent none that reads."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, per_second in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            return max(0.0, float(headers[name]) / per_second)
        except (KeyError, ValueError):
            continue
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


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


# -- what the user is told ----------------------------------------------------------------------


def describe_failure(exc: BaseException, ctx: EvidentContext) -> ModelFailure:
    """A model exception as a `ModelFailure` whose message a user can act on."""
    if isinstance(exc, ModelFailure):
        return exc
    if is_timeout(exc):
        return ModelFailure("timeout", f"the model did not answer within {ctx.model_timeout_s:g} s")
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
