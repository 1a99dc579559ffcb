"""What `build_graph` gives the nodes: one object, bound to each node with `functools.partial`."""

from __future__ import annotations

from dataclasses import dataclass

from evident.connectors.retrievers import RetrieverFactory, default_retriever
from evident.context import EvidentContext
from evident.embeddings import DEFAULT_EMBEDDINGS, GraphEmbeddings
from evident.llm.batching import TokenCounter, make_counter
from evident.llm.models import DEFAULT_MODELS, Models


@dataclass(frozen=True)
class GraphParts:
    """The retriever, chat models, embeddings and token counter of one compiled graph; the defaults build
    each from the run's settings (`EvidentContext`)."""

    retriever: RetrieverFactory = default_retriever
    models: Models = DEFAULT_MODELS
    embeddings: GraphEmbeddings = DEFAULT_EMBEDDINGS
    token_counter: TokenCounter | None = None

    def counter(self, ctx: EvidentContext) -> TokenCounter:
        """The token counter of the context budget: the injected one, else the settings' choice."""
        return self.token_counter or make_counter(ctx)


DEFAULT_PARTS = GraphParts()
