"""One LLM extraction call (paper §3.2): structured output first, then ever plainer fallbacks.

The ladder, from `EvidentContext.structured_output` down:

    json_schema / function_calling  →  json_mode  →  text

A rung is skipped when the server rejects the request shape (HTTP 400/415/422/501, or a chat model
without `with_structured_output`) or when its reply holds no readable passage list. Every reply is
read by `read_extraction` (strict, then tolerant); a reply cut off at the output-token limit keeps
its complete passages. Timeouts, rate limits after retries, refusals and a ladder with nothing
readable raise `ModelFailure`; the node then extracts that batch offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evident.alignment.models import Passage, SourceDocument
from evident.context import EvidentContext
from evident.llm import ModelFailure, call_with_retries, refusal_of, text_of
from evident.llm_output import read_extraction
from evident.prompts.extraction import EXTRACTION_PROMPT, response_format_schema, tool_schema
from evident.prompts.render import render_documents

_LADDERS: dict[str, tuple[str, ...]] = {
    "json_schema": ("json_schema", "json_mode", "text"),
    "function_calling": ("function_calling", "json_mode", "text"),
    "json_mode": ("json_mode", "text"),
    "text": ("text",),
}
_UNSUPPORTED_STATUS = frozenset({400, 415, 422, 501})
# Extraction replies are JSON for the pipeline: keep them out of a caller's token stream.
_CALL_CONFIG: dict[str, Any] = {"tags": ["nostream"], "run_name": "extract_passages"}


def _unsupported(exc: BaseException) -> bool:
    """The server (or chat model class) cannot do this request shape; a plainer one may work."""
    if isinstance(exc, NotImplementedError):
        return True
    from langchain_core.exceptions import ContextOverflowError

    if isinstance(exc, ContextOverflowError):
        return False  # the same prompt overflows on every rung
    status = getattr(exc, "status_code", None)
    return status in _UNSUPPORTED_STATUS


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
    from langchain_core.runnables import RunnableSequence

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


def extract_with_model(
    model: Any, ctx: EvidentContext, query: str, documents: Sequence[SourceDocument]
) -> tuple[list[Passage], str]:
    """Passages a model extracts from `documents`, and a note on how its reply was read."""
    messages = EXTRACTION_PROMPT.format_messages(documents=render_documents(documents), query=query)
    ladder = _LADDERS[ctx.structured_output]
    notes: list[str] = []
    for method in ladder:
        try:
            reply = call_with_retries(lambda m=method: _call(model, m, messages), ctx)  # type: ignore[misc]
        except Exception as exc:
            if _unsupported(exc) and method != ladder[-1]:
                notes.append(f"{method} not supported ({type(exc).__name__})")
                continue
            raise
        read = read_extraction(reply)
        if read.passages is not None:
            note = "; ".join([*notes, f"read with {method}" + (f" ({read.note})" if read.note else "")])
            return read.passages, note
        notes.append(f"{method}: {read.note or 'unreadable reply'}")
    raise ModelFailure("model", "no usable passage list in the model's replies (" + "; ".join(notes) + ")")
