"""Node instrumentation: each node's LangSmith run gets a summary of what the step did.

LangGraph already traces every node as its own run, named after the node. `instrument` wraps a
node so that, when a tracer is listening (LangSmith with `LANGSMITH_TRACING=true` and a key, a
`RunCollectorCallbackHandler`, ...), the summary of `evident.graph.tracing` is merged into the metadata of
that run just before it ends, and the model tokens its calls used are counted. With no tracer the
wrapper calls the node and returns: no summary is computed, nothing is counted.

How the run is found: inside a node, the callback manager of the node's config has the node's run
as its parent, and every tracer keeps the runs in progress in `run_map`; the run is still open
while the node function runs, so what is added here goes out with the run's end (LangSmith's
PATCH, or the collector's copy).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.context import register_configure_hook

from evident.context import ConfigError, EvidentContext
from evident.llm.models import Models
from evident.nodes.common import settings
from evident.llm.batching import TokenCounter, extraction_budget, make_counter
from evident.graph.tracing import summarize

log = logging.getLogger(__name__)

# Nodes whose model calls are counted; `extract` adds up the counts of its `extract_batch` tasks.
MODEL_NODES = frozenset({"extract_batch", "generate"})

try:  # the handlers behind stream_mode="messages" and astream_events: not traces, leave them alone
    from langchain_core.tracers._streaming import _StreamingCallbackHandler
except ImportError:  # pragma: no cover - an older langchain-core
    _StreamingCallbackHandler = None  # type: ignore[assignment,misc]


class TokenUsage(BaseCallbackHandler):
    """Adds up the token usage that chat models report for the calls made under it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.input = 0
        self.output = 0
        self.total = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                with self._lock:
                    self.calls += 1
                    self.input += int(usage.get("input_tokens", 0) or 0)
                    self.output += int(usage.get("output_tokens", 0) or 0)
                    self.total += int(usage.get("total_tokens", 0) or 0)

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "input_tokens": self.input, "output_tokens": self.output,
                "total_tokens": self.total}


# Registered once: every callback manager configured while the variable is set (the node's model
# calls) gets the counter. Registering per call would grow LangChain's hook list forever.
_usage_var: ContextVar[TokenUsage | None] = ContextVar("evident_token_usage", default=None)
register_configure_hook(_usage_var, inheritable=True)


class _Ledger:
    """Token counts of a query's extraction batches until its `extract` step collects them."""

    def __init__(self, size: int = 1024) -> None:
        self._lock = threading.Lock()
        self._by_run: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._size = size  # a query abandoned mid-way must not pin memory

    def add(self, graph_run: str, usage: Mapping[str, int]) -> None:
        with self._lock:
            total = self._by_run.setdefault(graph_run, {})
            for key, value in usage.items():
                total[key] = total.get(key, 0) + value
            self._by_run.move_to_end(graph_run)
            while len(self._by_run) > self._size:
                self._by_run.popitem(last=False)

    def pop(self, graph_run: str) -> dict[str, int] | None:
        with self._lock:
            return self._by_run.pop(graph_run, None)


_LEDGER = _Ledger()


def _is_stream_handler(handler: Any) -> bool:
    return _StreamingCallbackHandler is not None and _StreamingCallbackHandler in type(handler).__mro__


def node_runs(config: RunnableConfig | None) -> list[Any]:
    """The open runs of the current node, one per tracer listening; [] when nothing traces."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or callbacks.parent_run_id is None:
        return []
    key = str(callbacks.parent_run_id)
    runs = []
    for handler in callbacks.handlers:
        if isinstance(handler, BaseTracer) and not _is_stream_handler(handler):
            run = handler.run_map.get(key)
            if run is not None:
                runs.append(run)
    return runs


def attach_metadata(runs: list[Any], summary: Mapping[str, Any]) -> None:
    """Merge `summary` into each run's metadata. A key the run already has (inherited from the
    caller's config, or LangGraph's own) is kept, and ours goes in as `evident_<key>`."""
    for run in runs:
        old = dict(run.extra.get("metadata") or {})
        for key, value in summary.items():
            old[f"evident_{key}" if key in old else key] = value
        # A new dict: the old one may be shared with the config that later runs inherit from.
        run.extra["metadata"] = old


@contextmanager
def _counting(enabled: bool) -> Iterator[TokenUsage | None]:
    if not enabled:
        yield None
        return
    usage = TokenUsage()
    token = _usage_var.set(usage)
    try:
        yield usage
    finally:
        _usage_var.reset(token)


def _settings(runtime: Any) -> EvidentContext | None:
    """The run's settings as the nodes see them; None if they cannot be read (the node said why)."""
    try:
        return settings(runtime)
    except ConfigError:
        return None


class _Annotator:
    """Computes one node's summary and attaches it to its runs."""

    def __init__(self, name: str, models: Models, token_counter: TokenCounter | None) -> None:
        self.name = name
        self.models = models
        self.token_counter = token_counter

    def __call__(self, runs: list[Any], state: Any, update: Any, runtime: Any, usage: TokenUsage | None) -> None:
        try:
            self._annotate(runs, state, update, runtime, usage)
        except Exception:  # tracing is an observer: it must never fail a query
            log.warning("could not summarise the %s step for its trace", self.name, exc_info=True)

    def _annotate(self, runs: list[Any], state: Any, update: Any, runtime: Any, usage: TokenUsage | None) -> None:
        ctx = _settings(runtime)
        # Batches and their merge step are children of the same graph run (one per query, even when
        # several queries share a trace).
        graph_run = str(getattr(runs[0], "parent_run_id", "") or "")
        counts = usage.as_dict() if usage is not None and usage.calls else None
        if self.name == "extract_batch" and counts and graph_run:
            _LEDGER.add(graph_run, counts)
        if self.name == "extract" and graph_run:
            counts = _LEDGER.pop(graph_run)
        model = None
        counter = None
        if ctx is not None:
            model = self.models.name(ctx) if self.models.enabled(ctx) else None
            counter = self.token_counter or make_counter(ctx)
        summary = summarize(
            self.name, update if isinstance(update, Mapping) else None,
            state=state if isinstance(state, Mapping) else None, settings=ctx, model=model, usage=counts,
            counter=counter,
            budget=extraction_budget(ctx, counter) if ctx is not None and counter is not None else None,
        )
        attach_metadata(runs, summary)


def instrument(name: str, node: Any, *, models: Models, token_counter: TokenCounter | None = None) -> Any:
    """`node` with its run annotated; sync and async implementations are both kept."""
    try:
        from langgraph._internal._runnable import RunnableCallable, coerce_to_runnable
    except ImportError:  # pragma: no cover - a LangGraph without these: trace without summaries
        log.warning("langgraph internals moved: node runs are traced without EvidenT summaries")
        return node

    inner = coerce_to_runnable(node, name=name, trace=False)
    annotate = _Annotator(name, models, token_counter)
    counts_tokens = name in MODEL_NODES

    def call(state: Any, config: RunnableConfig, runtime: Any = None) -> Any:
        runs = node_runs(config)
        if not runs:
            return inner.invoke(state, config)
        with _counting(counts_tokens) as usage:
            update = inner.invoke(state, config)
        annotate(runs, state, update, runtime, usage)
        return update

    async def acall(state: Any, config: RunnableConfig, runtime: Any = None) -> Any:
        runs = node_runs(config)
        if not runs:
            return await inner.ainvoke(state, config)
        with _counting(counts_tokens) as usage:
            update = await inner.ainvoke(state, config)
        # Off the event loop: token counting and answer parsing are CPU work, and settings given as
        # nothing at all are read from evident.toml (the dev server refuses blocking calls on its loop).
        await asyncio.to_thread(annotate, runs, state, update, runtime, usage)
        return update

    call.__name__ = acall.__name__ = name
    return RunnableCallable(call, acall, name=name, trace=False)


def instrumented(models: Models, token_counter: TokenCounter | None) -> Callable[[str, Any], Any]:
    """`instrument` bound to the graph's models and token counter, for the builder."""
    return lambda name, node: instrument(name, node, models=models, token_counter=token_counter)
