"""Follow-up questions: the standalone question a conversation's last message asks.

A question with a `history` is rewritten once, by the graph's own `rewrite` step (the chat model in
LLM mode, else the offline rule; evident/nodes/rewrite.py), and every method then answers that
standalone question over the documents retrieved for it. Only the `rewrite` step runs here: the
graph is streamed until its update and stopped there.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from evident.context import EvidentContext
from evident.eval.dataset import EvalQuery
from evident.eval.retrieval import ReplayRetriever
from evident.graph import build_graph
from evident.models import Rewrite, SourceError
from evident.nodes.names import REWRITE
from evident.state import InputState, read


def rewrite_settings(ctx: EvidentContext) -> list[Any]:
    """What a standalone question depends on besides the conversation (part of the cache key)."""
    model = [ctx.model, ctx.base_url, ctx.temperature] if ctx.resolved_mode == "llm" else []
    return [ctx.resolved_mode, *model, ctx.max_query_chars]


class Rewriter:
    """The graph's `rewrite` step alone, for questions asked after a conversation."""

    def __init__(self, ctx: EvidentContext, chat_model: Any = None) -> None:
        self.ctx = ctx
        # The graph stops after `rewrite`: its retriever is never asked.
        self.graph = build_graph(retriever=ReplayRetriever(by_query={}), chat_model=chat_model,
                                 name="evident-eval-rewrite")

    def __call__(self, query: EvalQuery) -> tuple[str, list[str]]:
        """(the standalone question, problems to record: a failed model call, a refused conversation)."""
        messages: list[AnyMessage] = [
            HumanMessage(m.content) if m.role == "user" else AIMessage(m.content) for m in query.history
        ]
        inputs: InputState = {"messages": [*messages, HumanMessage(query.query)]}
        update: dict[str, Any] = {}
        # The stream runs a step only when asked for the next update: leaving after `rewrite` runs no other.
        for step in self.graph.stream(inputs, context=self.ctx, stream_mode="updates"):
            if REWRITE in step:
                update = dict(step[REWRITE] or {})
                break
        problems = [f"{e.source}: {e.message}" for e in read(SourceError, update.get("model_errors"))]
        info = Rewrite.model_validate(update["rewrite"]) if update.get("rewrite") is not None else None
        if info is not None and info.problem:
            problems.append(f"rewrite: {info.problem}")
        return str(update.get("query") or query.query), problems
