"""The EvidenT graph (DESIGN §2), and the compiled default that `langgraph.json` serves.

    START → rewrite → retrieve → extract → align ─┬─ no verified passage → insufficient → postprocess → END
                                                  └─ verified passages  → generate → verify → postprocess → END

`rewrite` turns a conversation's last message (`{"messages": [...]}`) into the standalone question
the rest of the graph answers; a `{"query": ...}` goes through as it is. `postprocess` appends the
answer to `messages` as an `AIMessage` (evident/conversation/).

In LLM mode, `retrieve` fans out to one `extract_batch` task per batch of documents that fits the
model's context budget (LangGraph `Send`, run in parallel), and `extract` merges their passages:

    retrieve ─┬─ Send → extract_batch ─┬→ extract
              └─ Send → extract_batch ─┘

A retrieval error (bad input, a refused conversation included) goes straight to `postprocess`.

Every node is traced as its own run named after it; `instrument` (evident/graph/instrument.py) adds
a summary of the step to that run's metadata whenever a tracer listens (docs/serving.md).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from evident.context import ContextWithDefaults, file_defaults
from evident.graph.instrument import instrumented
from evident.llm.models import DEFAULT_MODELS, Models
from evident.nodes.align import align, route_after_align
from evident.nodes.extract import make_extract_nodes
from evident.nodes.generate import make_generate
from evident.nodes.insufficient import insufficient
from evident.nodes.postprocess import postprocess
from evident.nodes.retrieve import RetrieverFactory, make_retrieve
from evident.nodes.rewrite import make_rewrite
from evident.nodes.verify import verify
from evident.state import EvidentState, InputState
from evident.llm.batching import TokenCounter

MAX_PARALLEL_TASKS = 32


def build_graph(
    *,
    retriever: Any = None,
    retriever_factory: RetrieverFactory | None = None,
    name: str = "evident",
    chat_model: Any = None,
    token_counter: TokenCounter | None = None,
    checkpointer: Any = None,
) -> Any:
    """Compile an EvidenT graph.

    `retriever`: any LangChain `BaseRetriever` to use instead of the local corpus index;
    `retriever_factory`: a callable `EvidentContext -> BaseRetriever` (chosen per run).
    With neither, the embedded local index over `EvidentContext.corpus` is used.
    `chat_model`: any LangChain chat model, or a callable `EvidentContext -> chat model`, for the
    extraction and generation calls; by default a `ChatOpenAI` is built from the run's settings
    (`EvidentContext.model`, `base_url`, the API key) when one is configured.
    `token_counter`: a callable `str -> int` (the model's own tokenizer) for the context budget;
    by default `EvidentContext.token_counter` chooses (evident/llm/batching.py).
    `checkpointer`: a LangGraph checkpointer (e.g. `InMemorySaver()`) to keep threads; every query
    on a thread starts from a clean per-query state (evident/state.py `start_of_query`) and the
    thread keeps the conversation (`messages`), so a follow-up can refer to earlier turns.
    """
    if retriever is not None and retriever_factory is not None:
        raise ValueError("pass either retriever or retriever_factory, not both")
    factory = (lambda _ctx: retriever) if retriever is not None else retriever_factory
    file_defaults()  # read evident.toml now, not inside a server's event loop (see ContextWithDefaults)
    # Input and output both hold `messages`: what LangGraph Studio needs to offer its chat view.
    builder = StateGraph(EvidentState, input_schema=InputState, output_schema=EvidentState,
                         context_schema=ContextWithDefaults)
    models = DEFAULT_MODELS if chat_model is None else Models(chat_model)
    route_extraction, extract_batch, extract = make_extract_nodes(models, token_counter)
    traced = instrumented(models, token_counter)
    builder.add_node("rewrite", traced("rewrite", make_rewrite(models)))
    builder.add_node("retrieve", traced("retrieve", make_retrieve(factory)))
    builder.add_node("extract_batch", traced("extract_batch", extract_batch))
    builder.add_node("extract", traced("extract", extract))
    builder.add_node("align", traced("align", align))
    builder.add_node("insufficient", traced("insufficient", insufficient))
    builder.add_node("generate", traced("generate", make_generate(models)))
    builder.add_node("verify", traced("verify", verify))
    builder.add_node("postprocess", traced("postprocess", postprocess))
    builder.add_edge(START, "rewrite")
    builder.add_edge("rewrite", "retrieve")
    builder.add_conditional_edges("retrieve", route_extraction, ["extract_batch", "extract", "postprocess"])
    builder.add_edge("extract_batch", "extract")
    builder.add_edge("extract", "align")
    builder.add_conditional_edges("align", route_after_align, ["generate", "insufficient"])
    builder.add_edge("generate", "verify")
    builder.add_edge("verify", "postprocess")
    builder.add_edge("insufficient", "postprocess")
    builder.add_edge("postprocess", END)
    # LangGraph's default thread pool holds min(32, CPUs + 4) threads: on a small machine it would run
    # the extraction batches in waves. Allow all of them (max_extract_batches) at once.
    return builder.compile(name=name, checkpointer=checkpointer).with_config(max_concurrency=MAX_PARALLEL_TASKS)


graph = build_graph()
