"""`from evident.graph import graph, build_graph`: the compiled default graph and its builder.

Both load on first use (PEP 562), so importing a framework-free submodule such as
`evident.graph.tracing` (the CLI's progress lines) does not pull in LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evident.graph.builder import build_graph, graph

__all__ = ["build_graph", "graph"]


def __getattr__(name: str) -> object:
    if name in __all__:
        # On first use, not at import: the CLI imports `evident.graph.tracing` without paying for LangGraph.
        from evident.graph import builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
