"""The EvidenT graph (DESIGN §2), and the compiled default that `langgraph.json` serves.

    START → retrieve → extract → align ─┬─ no verified passage → insufficient → postprocess → END
                                        └─ verified passages  → generate → verify → postprocess → END
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from evident.context import EvidentContext
from evident.nodes.align import align, route_after_align
from evident.nodes.extract import extract
from evident.nodes.generate import generate
from evident.nodes.insufficient import insufficient
from evident.nodes.postprocess import postprocess
from evident.nodes.retrieve import RetrieverFactory, make_retrieve
from evident.nodes.verify import verify
from evident.state import EvidentState, InputState


def _route_after_retrieve(state: EvidentState) -> str:
    return "postprocess" if state.get("status") == "error" else "extract"


def build_graph(
    *,
    retriever: Any = None,
    retriever_factory: RetrieverFactory | None = None,
    name: str = "evident",
) -> Any:
    """Compile an EvidenT graph.

    `retriever`: any LangChain `BaseRetriever` to use instead of the local corpus index;
    `retriever_factory`: a callable `EvidentContext -> BaseRetriever` (chosen per run).
    With neither, the embedded local index over `EvidentContext.corpus` is used.
    """
    if retriever is not None and retriever_factory is not None:
        raise ValueError("pass either retriever or retriever_factory, not both")
    factory = (lambda _ctx: retriever) if retriever is not None else retriever_factory
    builder = StateGraph(EvidentState, input_schema=InputState, context_schema=EvidentContext)
    builder.add_node("retrieve", make_retrieve(factory))
    builder.add_node("extract", extract)
    builder.add_node("align", align)
    builder.add_node("insufficient", insufficient)
    builder.add_node("generate", generate)
    builder.add_node("verify", verify)
    builder.add_node("postprocess", postprocess)
    builder.add_edge(START, "retrieve")
    builder.add_conditional_edges("retrieve", _route_after_retrieve, ["extract", "postprocess"])
    builder.add_edge("extract", "align")
    builder.add_conditional_edges("align", route_after_align, ["generate", "insufficient"])
    builder.add_edge("generate", "verify")
    builder.add_edge("verify", "postprocess")
    builder.add_edge("insufficient", "postprocess")
    builder.add_edge("postprocess", END)
    return builder.compile(name=name)


graph = build_graph()
