"""`instrument(name, node, parts)`: the node, whose trace run gets the summary of its step (evident/graph/tracing.py)
and its model tokens while a tracer listens (`evident.nodes.runs.traced`); with none, it only calls the node."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, Protocol

from langgraph.runtime import Runtime

from evident.context import ConfigError, EvidentContext, run_settings
from evident.embeddings import describe
from evident.graph.tracing import summarize
from evident.llm.batching import extraction_budget
from evident.llm.usage import counting_tokens
from evident.nodes.names import RETRIEVE
from evident.nodes.parts import GraphParts
from evident.nodes.runs import add_to_run, traced

log = logging.getLogger(__name__)


class GraphNode(Protocol):  # how LangGraph calls a node that takes the run's `Runtime`
    def __call__(self, state: Any, *, runtime: Runtime[EvidentContext]) -> Mapping[str, Any]: ...


def _summary(name: str, state: Any, update: Mapping[str, Any], runtime: Runtime[EvidentContext],
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
        if not traced():
            return node(state, runtime)
        with counting_tokens() as usage:
            update = node(state, runtime)
        try:
            add_to_run(_summary(name, state, update, runtime, parts, usage.as_dict()))
        except Exception:  # tracing is an observer: it must never fail a query
            log.warning("could not summarise the %s step for its trace", name, exc_info=True)
        return update

    return run
