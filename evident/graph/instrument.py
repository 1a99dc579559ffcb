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

`TracedNode` is the node LangGraph runs: a `Runnable` that makes no run of its own (the node's run
is LangGraph's), gives the node function the run's `Runtime` (`langgraph.runtime.get_runtime`), and
keeps a node's asyncio implementation (`Dual`, evident/nodes/common.py) for `ainvoke`.
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
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, run_in_executor
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.context import register_configure_hook
from langchain_core.tracers.log_stream import LogStreamCallbackHandler
from langgraph.runtime import get_runtime

from evident.context import ConfigError, EvidentContext, run_settings
from evident.embeddings import DEFAULT_EMBEDDINGS, GraphEmbeddings, describe
from evident.graph.tracing import summarize
from evident.llm.batching import TokenCounter, extraction_budget, make_counter
from evident.llm.models import Models
from evident.nodes.common import Dual, NodeRuntime
from evident.nodes.names import EXTRACT, EXTRACT_BATCH, MODEL_NODES, RETRIEVE

log = logging.getLogger(__name__)

NodeFunction = Callable[[Any, NodeRuntime], Mapping[str, Any]]
Node = NodeFunction | Dual[Any, Any]  # a blocking node, or one with an asyncio implementation too

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


def node_runs(config: RunnableConfig | None) -> list[Any]:
    """The open runs of the current node, one per tracer listening; [] when nothing traces."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or callbacks.parent_run_id is None:
        return []
    key = str(callbacks.parent_run_id)
    runs = []
    for handler in callbacks.handlers:
        # The tracer behind astream_log streams a caller's output: not a trace, leave it alone (the
        # handlers of stream_mode="messages" and astream_events are no tracers at all).
        if isinstance(handler, BaseTracer) and not isinstance(handler, LogStreamCallbackHandler):
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


def _settings(runtime: NodeRuntime) -> EvidentContext | None:
    """The run's settings as the nodes see them; None if they cannot be read (the node said why)."""
    try:
        return run_settings(runtime)
    except ConfigError:
        return None


class _Annotator:
    """Computes one node's summary and attaches it to its runs."""

    def __init__(self, name: str, models: Models, token_counter: TokenCounter | None,
                 embeddings: GraphEmbeddings = DEFAULT_EMBEDDINGS) -> None:
        self.name = name
        self.models = models
        self.token_counter = token_counter
        self.embeddings = embeddings

    def __call__(self, runs: list[Any], state: Any, update: Any, runtime: NodeRuntime,
                 usage: TokenUsage | None) -> None:
        try:
            self._annotate(runs, state, update, runtime, usage)
        except Exception:  # tracing is an observer: it must never fail a query
            log.warning("could not summarise the %s step for its trace", self.name, exc_info=True)

    def _annotate(self, runs: list[Any], state: Any, update: Any, runtime: NodeRuntime,
                  usage: TokenUsage | None) -> None:
        ctx = _settings(runtime)
        # Batches and their merge step are children of the same graph run (one per query, even when
        # several queries share a trace).
        graph_run = str(getattr(runs[0], "parent_run_id", "") or "")
        counts = usage.as_dict() if usage is not None and usage.calls else None
        if self.name == EXTRACT_BATCH and counts and graph_run:
            _LEDGER.add(graph_run, counts)
        if self.name == EXTRACT and graph_run:
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
        if self.name == RETRIEVE and ctx is not None:  # whether this run could rank by meaning, and if not why
            summary = {**summary, "embeddings": describe(self.embeddings.resolve(ctx))}
        attach_metadata(runs, summary)


def _runtime() -> NodeRuntime:
    try:
        return get_runtime(EvidentContext)
    except RuntimeError:  # invoked outside a graph run: the node reads the default settings
        return None


class TracedNode(Runnable[Any, Any]):
    """One node of the graph, annotated in its run when a tracer listens."""

    def __init__(self, name: str, node: Node, annotate: _Annotator) -> None:
        self.name = name
        self.node = node
        self.annotate = annotate
        self.counts_tokens = name in MODEL_NODES

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        runtime = _runtime()
        runs = node_runs(ensure_config(config))
        if not runs:
            return self.node(input, runtime)
        with _counting(self.counts_tokens) as usage:
            update = self.node(input, runtime)
        self.annotate(runs, input, update, runtime, usage)
        return update

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        runtime = _runtime()
        runs = node_runs(ensure_config(config))
        if not runs:
            return await self._acall(input, runtime)
        with _counting(self.counts_tokens) as usage:
            update = await self._acall(input, runtime)
        # Off the event loop: token counting and answer parsing are CPU work, and settings given as
        # nothing at all are read from evident.toml (the dev server refuses blocking calls on its loop).
        await asyncio.to_thread(self.annotate, runs, input, update, runtime, usage)
        return update

    async def _acall(self, state: Any, runtime: NodeRuntime) -> Mapping[str, Any]:
        update: Mapping[str, Any]
        if isinstance(self.node, Dual):
            update = await self.node.asynchronous(state, runtime)
        else:
            # A blocking node runs in a worker thread, with this context (the token counter, the run's config).
            update = await run_in_executor(None, self.node, state, runtime)
        return update


def instrument(name: str, node: Node, *, models: Models, token_counter: TokenCounter | None = None,
               embeddings: GraphEmbeddings = DEFAULT_EMBEDDINGS) -> TracedNode:
    """`node` as the graph runs it: its run annotated; sync and async implementations are both kept."""
    return TracedNode(name, node, _Annotator(name, models, token_counter, embeddings))


def instrumented(models: Models, token_counter: TokenCounter | None,
                 embeddings: GraphEmbeddings = DEFAULT_EMBEDDINGS) -> Callable[[str, Node], TracedNode]:
    """`instrument` bound to the graph's models, token counter and embeddings, for the builder."""
    return lambda name, node: instrument(name, node, models=models, token_counter=token_counter,
                                         embeddings=embeddings)
