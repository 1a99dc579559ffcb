"""The model tokens a step used, as its chat models reported them (LangChain's usage callback)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import BaseCallbackManager, UsageMetadataCallbackHandler
from langchain_core.outputs import LLMResult
from langgraph.config import get_config


class TokenUsage(UsageMetadataCallbackHandler):
    """`UsageMetadataCallbackHandler` that also counts the calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        super().on_llm_end(response, **kwargs)
        with self._lock:
            self.calls += 1

    def as_dict(self) -> dict[str, int] | None:
        """`{calls, input_tokens, output_tokens, total_tokens}` over every model; None when no call was made."""
        if not self.calls:
            return None
        totals = {"calls": self.calls, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        for usage in self.usage_metadata.values():
            totals["input_tokens"] += usage["input_tokens"]
            totals["output_tokens"] += usage["output_tokens"]
            totals["total_tokens"] += usage["total_tokens"]
        return totals


@contextmanager
def counting_tokens() -> Iterator[TokenUsage]:
    """Count the tokens of the model calls the current graph node makes inside the block.

    The counter joins the node's own callback manager (the model calls inherit it), and leaves it after
    the block; outside a graph run nothing is counted."""
    usage = TokenUsage()
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # called outside a graph run (a unit test of a node)
        callbacks = None
    if not isinstance(callbacks, BaseCallbackManager):
        yield usage
        return
    callbacks.add_handler(usage, inherit=True)
    try:
        yield usage
    finally:
        callbacks.remove_handler(usage)
