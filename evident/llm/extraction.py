"""One LLM extraction call (paper §3.2): structured output first, then ever plainer fallbacks.

The ladder, from `EvidentContext.structured_output` down:

    json_schema / function_calling  →  json_mode  →  text

A server that rejects a request shape (any HTTP 4xx/5xx whose error names `response_format`,
`json_schema`, `tools` or `tool_choice`; or 400/415/422/501; or a chat model without
`with_structured_output`) moves the call to the next rung at once, without retries: llama-cpp-python
answers `json_schema` with HTTP 500. A structured call that fails otherwise also tries the next
rung; a timeout, a refusal or a context overflow does not (every rung would fail the same way).
A rung whose reply holds no readable passage list is skipped too. The rung that worked is remembered
per (base URL, model) for the process, so later calls start there; it is reported in the batch's
note, `extraction_notes` and the trace. Every reply is read by `read_extraction` (strict, then
tolerant); a reply cut off at the output-token limit keeps its complete passages; passages that
repeat the prompt's example are dropped.

Each rung is `with_structured_output(schema, method=...)` (its request step, see `_structured_request`).
The ladder is a loop rather than `.with_fallbacks`: a fallback chain moves on only when a rung raises,
and chooses by exception type, whereas a rung here also fails by an unreadable reply, the choice
depends on the status and message (a 500 naming `response_format` moves on, another 500 does not),
every rung tried goes into the note, and the rung that worked is remembered. A chain that moves on at
any exception walks every rung on a 429 or a timeout: three requests where one times out.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.runnables import RunnableSequence

from evident.alignment import drops
from evident.alignment.models import Passage, SourceDocument
from evident.context import EvidentContext
from evident.llm.failures import (
    ModelFailure,
    call_with_retries,
    http_status,
    is_retryable,
    is_timeout,
    server_message,
)
from evident.llm.replies import read_extraction, refusal_of, text_of
from evident.llm.servers import model_base_url, server_slot
from evident.prompts.extraction import EXTRACTION_PROMPT, echoes_example, response_format_schema, tool_schema
from evident.prompts.render import render_documents

_LADDERS: dict[str, tuple[str, ...]] = {
    "json_schema": ("json_schema", "json_mode", "text"),
    "function_calling": ("function_calling", "json_mode", "text"),
    "json_mode": ("json_mode", "text"),
    "text": ("text",),
}
_UNSUPPORTED_STATUS = frozenset({400, 415, 422, 501})
_SHAPE_WORDS = re.compile(r"response_format|json_schema|json_object|tool_choice|\btools?\b", re.IGNORECASE)
# Extraction replies are JSON for the pipeline: keep them out of a caller's token stream.
_CALL_CONFIG: dict[str, Any] = {"tags": ["nostream"], "run_name": "extract_passages"}

_rung_lock = threading.Lock()
_working_rung: dict[tuple[str, str], str] = {}


def _is_overflow(exc: BaseException) -> bool:
    return isinstance(exc, ContextOverflowError)


def rejects_shape(exc: BaseException) -> bool:
    """The server (or chat model class) cannot do this request shape; a plainer one may work."""
    if isinstance(exc, NotImplementedError):
        return True
    if _is_overflow(exc):
        return False  # the same prompt overflows on every rung
    status = http_status(exc)
    if status in _UNSUPPORTED_STATUS:
        return True
    return status is not None and status >= 400 and bool(_SHAPE_WORDS.search(server_message(exc)))


def _next_rung_may_help(exc: BaseException) -> bool:
    """A plainer request shape may succeed: not for a timeout, a refusal, a context overflow, rate
    limiting or an unreachable server, which every rung would meet the same way."""
    if rejects_shape(exc):
        return True
    if is_timeout(exc) or isinstance(exc, ModelFailure) or _is_overflow(exc) or http_status(exc) == 429:
        return False
    return http_status(exc) is not None or not is_retryable(exc)


def rung_key(model: Any, ctx: EvidentContext) -> tuple[str, str] | None:
    """Where the working rung is remembered: per server and model; None for an injected model that
    names neither (a test double), whose behaviour may change from call to call."""
    base_url = model_base_url(model, ctx)
    name = ctx.model or getattr(model, "model_name", None)
    if base_url is None and not ctx.model:
        return None
    return (base_url or "openai", str(name or ""))


def working_rung(key: tuple[str, str] | None) -> str | None:
    with _rung_lock:
        return _working_rung.get(key) if key else None


def remember_rung(key: tuple[str, str] | None, method: str) -> None:
    if key:
        with _rung_lock:
            _working_rung[key] = method


def forget_rungs() -> None:
    """For `evident model check`, which probes from the top of the ladder."""
    with _rung_lock:
        _working_rung.clear()


def _call(model: Any, method: str, messages: list[Any]) -> Any:
    """One request; returns the reply as parsed JSON (tool arguments), raw text, or None when empty."""
    if method == "text":
        message = model.invoke(messages, config=_CALL_CONFIG)
        _raise_on_refusal(message)
        return text_of(message)
    schema = tool_schema() if method == "function_calling" else response_format_schema()
    try:
        raw = _structured_request(model, schema, method).invoke(messages, config=_CALL_CONFIG)
    except Exception as exc:
        cut = _cut_off_content(exc)
        if cut is None:
            raise
        return cut
    if isinstance(raw, dict) and "raw" in raw:  # the include_raw form (see _structured_request)
        raw = raw["raw"]
    _raise_on_refusal(raw)
    if method == "function_calling" and raw is not None:
        calls = getattr(raw, "tool_calls", None) or []
        if calls:
            return calls[0].get("args")
        broken = getattr(raw, "invalid_tool_calls", None) or []
        if broken:
            return broken[0].get("args") or None
    return text_of(raw) if raw is not None else None


def _structured_request(model: Any, schema: dict[str, Any], method: str) -> Any:
    """The model call `with_structured_output` builds for `method`, without its output parser.

    The parser's result is not used: it completes cut-off JSON, which would turn the passage a
    reply was cut off in into a shortened "verbatim" one; `read_extraction` reads the raw reply
    instead. `with_structured_output(...)` is `request | parser`, so its first step is the request
    (which also saves the thread its `include_raw=True` form starts per call). A chat model that
    builds something else is called in the `include_raw=True` form.
    """
    runnable = model.with_structured_output(schema, method=method)
    if isinstance(runnable, RunnableSequence):
        return runnable.first
    return model.with_structured_output(schema, method=method, include_raw=True)


def _cut_off_content(exc: BaseException) -> str | None:
    """The text of a reply the SDK refused to parse because it hit the output-token limit."""
    if type(exc).__name__ != "LengthFinishReasonError":
        return None
    try:
        return str(exc.completion.choices[0].message.content or "")  # type: ignore[attr-defined]
    except (AttributeError, IndexError):
        return None


def _raise_on_refusal(message: Any) -> None:
    refusal = refusal_of(message)
    if refusal:
        raise ModelFailure("model", f"the model refused: {refusal}")


def _drop_examples(passages: list[Passage]) -> tuple[list[Passage], int]:
    kept = [p for p in passages if not echoes_example(p.url, p.content)]
    return kept, len(passages) - len(kept)


def extract_with_model(
    model: Any, ctx: EvidentContext, query: str, documents: Sequence[SourceDocument]
) -> tuple[list[Passage], str, str]:
    """Passages a model extracts from `documents`, a note on how its reply was read, and the rung used."""
    messages = EXTRACTION_PROMPT.format_messages(documents=render_documents(documents), query=query)
    ladder = _LADDERS[ctx.structured_output]
    key = rung_key(model, ctx)
    known = working_rung(key)
    if known in ladder:
        ladder = ladder[ladder.index(known):]
    notes: list[str] = []

    def request(method: str) -> Any:
        with server_slot(ctx, model):  # the timeout starts when the request is sent, not while queued
            return _call(model, method, messages)

    for method in ladder:
        try:
            reply = call_with_retries(lambda m=method: request(m), ctx, final=rejects_shape)  # type: ignore[misc]
        except Exception as exc:
            if method == ladder[-1] or not _next_rung_may_help(exc):
                raise
            why = "rejected by the server" if rejects_shape(exc) else "failed"
            status = http_status(exc)
            notes.append(f"{method} {why} ({f'HTTP {status}: ' if status else ''}{server_message(exc)})")
            continue
        read = read_extraction(reply)
        if read.passages is not None:
            remember_rung(key, method)
            passages, echoed = _drop_examples(read.passages)
            extra = [read.note] if read.note else []
            if echoed:
                extra.append(drops.PROMPT_EXAMPLE.format(n=echoed))
            note = "; ".join([*notes, f"read with {method}" + (f" ({'; '.join(extra)})" if extra else "")])
            return passages, note, method
        notes.append(f"{method}: {read.note or 'unreadable reply'}")
    raise ModelFailure("model", "no usable passage list in the model's replies (" + "; ".join(notes) + ")")
