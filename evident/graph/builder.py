"""The EvidenT graph (DESIGN §2), and the compiled default that `langgraph.json` serves.

    START → rewrite → retrieve → extract → align ─┬─ no verified passage → insufficient → postprocess → END
                                                  └─ verified passages  → generate → verify → postprocess → END

`rewrite` turns a conversation's last message (`{"messages": [...]}`) into the standalone question
the rest of the graph answers; a `{"query": ...}` goes through as it is. It starts the query: it reads the
conversation once, settles who is asking, and ends a query on bad input (a refused conversation included)
by going straight to `postprocess` (evident/nodes/prepare.py). `postprocess` appends the answer to
`messages` as an `AIMessage` (evident/conversation/).

In LLM mode, `retrieve` fans out to one `extract_batch` task per batch of documents that fits the
model's context budget (LangGraph `Send`, run in parallel), and `extract` merges their passages:

    retrieve ─┬─ Send → extract_batch ─┬→ extract
              └─ Send → extract_batch ─┘

A retrieval error (nothing could be searched) goes straight to `postprocess`, as bad input does.

Every node is a function `(state, runtime) -> update`; what `build_graph` is given reaches them as one
`GraphParts` (evident/nodes/parts.py), bound with `functools.partial`. Every node is traced as its own run
named after it; `instrument` (evident/graph/instrument.py) stores its update as JSON, streams its progress
(`stream_mode="custom"`) and adds a summary of the step to that run's metadata whenever a tracer listens
(docs/serving.md); the run records ids and decisions, not document texts (`TRACE_POLICY`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from evident.connectors.retrievers import RetrieverFactory, default_retriever
from evident.context import EvidentContext
from evident.embeddings import DEFAULT_EMBEDDINGS, EmbeddingsFactory, GraphEmbeddings
from evident.graph.instrument import TRACE_POLICY, instrument
from evident.llm.batching import TokenCounter
from evident.llm.models import DEFAULT_MODELS, Models
from evident.nodes.align import align, route_after_align
from evident.nodes.extract import extract, extract_batch, route_extraction
from evident.nodes.generate import generate
from evident.nodes.insufficient import insufficient
from evident.nodes.names import (
    ALIGN,
    EXTRACT,
    EXTRACT_BATCH,
    GENERATE,
    INSUFFICIENT,
    POSTPROCESS,
    RETRIEVE,
    REWRITE,
    VERIFY,
)
from evident.nodes.parts import GraphParts
from evident.nodes.postprocess import postprocess
from evident.nodes.prepare import route_after_rewrite
from evident.nodes.retrieve import retrieve
from evident.nodes.rewrite import rewrite
from evident.nodes.runs import NODE_RUNS
from evident.nodes.verify import verify
from evident.request_settings import ContextWithDefaults, file_defaults
from evident.state import EvidentState, InputState, OutputState

MAX_PARALLEL_TASKS = 32
EvidentGraph = CompiledStateGraph[EvidentState, EvidentContext, InputState, OutputState]


def build_graph(
    *,
    retriever: BaseRetriever | None = None,
    retriever_factory: RetrieverFactory | None = None,
    name: str = "evident",
    chat_model: Any = None,
    token_counter: TokenCounter | None = None,
    checkpointer: Any = None,
    embeddings: Embeddings | EmbeddingsFactory | None = None,
) -> EvidentGraph:
    """Compile an EvidenT graph.

    `retriever`: any LangChain `BaseRetriever` to use instead of the local corpus index;
    `retriever_factory`: a callable `EvidentContext -> BaseRetriever` (chosen per run).
    With neither, the configured sources or the embedded local index over `EvidentContext.corpus`
    are used (evident/connectors/retrievers.py).
    `chat_model`: any LangChain chat model, or a callable `EvidentContext -> chat model`, for the
    extraction and generation calls; by default a `ChatOpenAI` is built from the run's settings
    (`EvidentContext.model`, `base_url`, the API key) when one is configured.
    `token_counter`: a callable `str -> int` (the model's own tokenizer) for the context budget;
    by default `EvidentContext.token_counter` chooses (evident/llm/batching.py).
    `checkpointer`: a LangGraph checkpointer (e.g. `InMemorySaver()`) to keep threads; every query
    on a thread starts from a clean per-query state (evident/state.py `start_of_query`) and the
    thread keeps the conversation (`messages`), so a follow-up can refer to earlier turns.
    `embeddings`: any LangChain `Embeddings`, or a callable `EvidentContext -> Embeddings | None`;
    by default they come from the run's settings (`[embeddings]`, docs/embeddings.md), and without
    any the graph works by words only. A run reaches them with `GraphEmbeddings.resolve(ctx)`.
    """
    if retriever is not None and retriever_factory is not None:
        raise ValueError("pass either retriever or retriever_factory, not both")
    given = retriever
    parts = GraphParts(
        retriever=(lambda _ctx: given) if given is not None else retriever_factory or default_retriever,
        models=DEFAULT_MODELS if chat_model is None else Models(chat_model),
        embeddings=DEFAULT_EMBEDDINGS if embeddings is None else GraphEmbeddings(embeddings),
        token_counter=token_counter,
    )
    file_defaults()  # read evident.toml now, not inside a server's event loop (see ContextWithDefaults)
    # Input and output both hold `messages`: what LangGraph Studio needs to offer its chat view.
    builder = StateGraph[EvidentState, EvidentContext, InputState, OutputState](
        EvidentState, input_schema=InputState, output_schema=OutputState, context_schema=ContextWithDefaults)
    def add(name: str, node: Callable[[Any, Runtime[EvidentContext]], Mapping[str, Any]]) -> None:
        builder.add_node(name, instrument(name, node, parts), trace_policy=TRACE_POLICY)

    add(REWRITE, partial(rewrite, parts=parts))
    add(RETRIEVE, partial(retrieve, parts=parts))
    add(EXTRACT_BATCH, partial(extract_batch, parts=parts))
    add(EXTRACT, partial(extract, parts=parts))
    add(ALIGN, align)
    add(INSUFFICIENT, insufficient)
    add(GENERATE, partial(generate, parts=parts))
    add(VERIFY, verify)
    add(POSTPROCESS, postprocess)
    builder.add_edge(START, REWRITE)
    builder.add_conditional_edges(REWRITE, route_after_rewrite, [RETRIEVE, POSTPROCESS])
    builder.add_conditional_edges(RETRIEVE, partial(route_extraction, parts=parts),
                                  [EXTRACT_BATCH, EXTRACT, POSTPROCESS])
    builder.add_edge(EXTRACT_BATCH, EXTRACT)
    builder.add_edge(EXTRACT, ALIGN)
    builder.add_conditional_edges(ALIGN, route_after_align, [GENERATE, INSUFFICIENT])
    builder.add_edge(GENERATE, VERIFY)
    builder.add_edge(VERIFY, POSTPROCESS)
    builder.add_edge(INSUFFICIENT, POSTPROCESS)
    builder.add_edge(POSTPROCESS, END)
    # LangGraph's default thread pool holds min(32, CPUs + 4) threads: on a small machine it would run
    # the extraction batches in waves. Allow all of them (max_extract_batches) at once. `NODE_RUNS` hands
    # each node the metadata of its run, for tracers other than LangSmith's (evident/nodes/runs.py).
    compiled = builder.compile(name=name, checkpointer=checkpointer)
    return compiled.with_config(max_concurrency=MAX_PARALLEL_TASKS, callbacks=[NODE_RUNS])


graph = build_graph()
