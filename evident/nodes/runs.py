"""The trace run of the node being run, reached through public APIs, to add a step's summary to it.

LangSmith's run of the node is `langsmith.run_helpers.get_current_run_tree()` (LangGraph sets it while a
node runs). Any other LangChain tracer (a `RunCollectorCallbackHandler`, ...) gets the metadata mapping
its run starts with from the callback event `on_chain_start`, as `NODE_RUNS` does, a callback handler
the builder puts in the graph's config: what joins that mapping before the run ends is in the run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.log_stream import LogStreamCallbackHandler
from langgraph.config import get_config
from langsmith.run_helpers import get_current_run_tree


class NodeRuns(BaseCallbackHandler):
    """The metadata of every node run in progress, by run id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[UUID, dict[str, Any]] = {}

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if metadata is not None and metadata.get("langgraph_node") == kwargs.get("name"):
            with self._lock:
                self._open[run_id] = metadata

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._open.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.on_chain_end(None, run_id=run_id)

    def metadata_of(self, run_id: UUID) -> dict[str, Any] | None:
        with self._lock:
            return self._open.get(run_id)


NODE_RUNS = NodeRuns()


def _node_callbacks() -> BaseCallbackManager | None:
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # called outside a graph run (a unit test of a node)
        return None
    return callbacks if isinstance(callbacks, BaseCallbackManager) else None


def traced() -> bool:
    """Whether a tracer listens to the node being run. The tracer behind `astream_log` streams a caller's
    output, so it does not count (nor do the handlers of `stream_mode="messages"` and `astream_events`)."""
    callbacks = _node_callbacks()
    return callbacks is not None and any(isinstance(h, BaseTracer) and not isinstance(h, LogStreamCallbackHandler)
                                         for h in callbacks.handlers)


def add_to_run(summary: Mapping[str, Any]) -> None:
    """Merge `summary` into the metadata of the node's run. A key the run already has (from the caller's
    config, or LangGraph's own) keeps its value, and ours goes in as `evident_<key>`."""
    run = get_current_run_tree()
    callbacks = _node_callbacks()
    metadata = run.metadata if run is not None else None
    if metadata is None and callbacks is not None and callbacks.parent_run_id is not None:
        metadata = NODE_RUNS.metadata_of(callbacks.parent_run_id)
    if metadata is None:
        return
    for key, value in summary.items():
        metadata[f"evident_{key}" if key in metadata else key] = value
