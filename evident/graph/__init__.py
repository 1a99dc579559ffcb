"""`from evident.graph import graph, build_graph`: the compiled default graph and its builder."""

from evident.graph.builder import build_graph, graph

__all__ = ["build_graph", "graph"]
