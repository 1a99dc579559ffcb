"""The graph's branches are visible in types: every router returns a `Literal` of node names (and a
`list[Send]` where it fans out), and those names are the destinations its edge declares (issue 28)."""

from __future__ import annotations

import types
from functools import partial
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from evident.graph import graph


def _router(path: Any) -> Any:
    func = getattr(path, "func", None) or getattr(path, "afunc", None)
    while isinstance(func, partial):
        func = func.func
    return func


def untyped_routes(compiled: Any) -> list[str]:
    """Every conditional edge whose router is not typed `Literal[...]` (or `Literal[...] | list[Send]`), or
    whose `Literal` names other nodes than the edge's destinations (a `Send` may go to any of them)."""
    found = []
    for source, branches in compiled.builder.branches.items():
        for branch in branches.values():
            router = _router(branch.path)
            hint = get_type_hints(router).get("return") if router is not None else None
            parts = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
            literals = [p for p in parts if get_origin(p) is Literal]
            sends = [p for p in parts if get_origin(p) is list and get_args(p) == (Send,)]
            named = {name for literal in literals for name in get_args(literal)}
            ends = set((branch.ends or {}).values())
            if not literals or len(literals) + len(sends) != len(parts) or not named <= ends or (
                    not sends and named != ends):
                found.append(f"{source}: {getattr(router, '__name__', router)} -> {hint}")
    return found


class _State(TypedDict, total=False):
    x: int


def _graph_with(router: Any) -> Any:
    builder = StateGraph(_State)
    builder.add_node("a", lambda s: s)
    builder.add_node("b", lambda s: s)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", router, ["b", END])
    builder.add_edge("b", END)
    return builder.compile()


def by_name(state: _State) -> str:
    return "b"


def by_literal(state: _State) -> Literal["b", "__end__"]:
    return "b"


def fanning_out(state: _State, *, weight: int = 1) -> Literal["__end__"] | list[Send]:
    return [Send("b", state)]


def test_the_check_finds_a_router_typed_str() -> None:
    assert untyped_routes(_graph_with(by_name)) == ["a: by_name -> <class 'str'>"]
    assert untyped_routes(_graph_with(by_literal)) == []
    assert untyped_routes(_graph_with(partial(fanning_out, weight=2))) == []


def test_every_router_of_the_graph_returns_a_literal_of_its_destinations() -> None:
    assert len([b for branches in graph.builder.branches.values() for b in branches.values()]) == 3
    assert untyped_routes(graph) == []
