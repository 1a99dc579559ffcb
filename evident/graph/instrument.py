"""`instrument(name, node, parts)`: the node as the graph runs it.

- Its update is stored as JSON (`evident.state.update_as_json`): the state holds the same shapes locally and on
  a server.
- `stream_mode="custom"` gets a `{"node", "event": "start"}` before the step and `{"node", "event": "end", ...}`
  with its counts after it (`evident.graph.tracing.progress`), through LangGraph's stream writer.
- Its trace run gets the summary of its step (evident/graph/tracing.py) and its model tokens while a tracer
  listens (`evident.nodes.runs.traced`); `TRACE_POLICY` keeps that run's inputs and outputs to ids and decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from functools import wraps
from typing import Any, Protocol

from langgraph.runtime import Runtime
from langgraph.types import TracePolicy

from evident.context import EvidentContext
from evident.embeddings import describe
from evident.graph.tracing import progress, summarize, trace_record
from evident.llm.batching import extraction_budget
from evident.llm.usage import counting_tokens
from evident.nodes.names import RETRIEVE
from evident.nodes.parts import GraphParts
from evident.nodes.runs import add_to_run, traced
from evident.request_settings import run_settings
from evident.settings import ConfigError
from evident.state import update_as_json

log = logging.getLogger(__name__)
# What a node's trace run records: the ids, counts and decisions of what it read and wrote, never the text
# of a document or a passage (the whole state would put every retrieved document in every node's run).
TRACE_POLICY = TracePolicy(process_inputs=trace_record, process_outputs=trace_record)


class GraphNode(Protocol):  # how LangGraph calls a node that takes the run's `Runtime`
    def __call__(self, state: Any, *, runtime: Runtime[EvidentContext]) -> Mapping[str, Any]: ...


def trace_summary(name: str, state: Any, update: Mapping[str, Any], runtime: Runtime[EvidentContext],
             parts: GraphParts, tokens: dict[str, int] | None) -> dict[str, Any]:
    try:
        ctx: EvidentContext | None = run_settings(runtime)
    except ConfigError:  # the node itself said why
        ctx = None
    counter = parts.counter(ctx) if ctx is not None else None
    summary = summarize(
        name, update, state=state if isinstance(state, Mapping) else None, settings=ctx, usage=tokens,
        model=parts.models.name(ctx) if ctx is not None and parts.models.enabled(ctx) else None, counter=counter,
        budget=extraction_budget(ctx, counter) if ctx is not None and counter is not None else None)
    if name == RETRIEVE and ctx is not None:  # whether this run could rank by meaning, and if not why
        summary["embeddings"] = describe(parts.embeddings.resolve(ctx))
    return summary


def instrument(name: str, node: Callable[[Any, Runtime[EvidentContext]], Mapping[str, Any]],
               parts: GraphParts) -> GraphNode:
    @wraps(node)
    def run(state: Any, runtime: Runtime[EvidentContext]) -> Mapping[str, Any]:
        write = runtime.stream_writer
        write({"node": name, "event": "start"})
        with counting_tokens() if traced() else nullcontext() as usage:
            update = node(state, runtime)
        try:
            if usage is not None:
                summary = trace_summary(name, state, update, runtime, parts, usage.as_dict())
                add_to_run(summary)
            else:
                summary = summarize(name, update, state=state if isinstance(state, Mapping) else None)
            write(progress(name, summary))
        except Exception:  # tracing and progress are observers: they must never fail a query
            log.warning("could not summarise the %s step", name, exc_info=True)
        return update_as_json(update)

    return run
