"""One settings surface: a request setting means the same through `configurable`, `context` and the server
(the same allowlist and bounds), and every schema the graph publishes lists exactly the request settings."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import TypeAdapter

from evident.context import EvidentContext
from evident.graph import build_graph, graph
from evident.request_settings import (
    REQUEST_BOUNDS,
    REQUEST_SETTINGS,
    ContextWithDefaults,
    RequestSettingsError,
    check_request_settings,
)

Q = "How many days do I have to submit an expense report after a trip?"
# What the LangGraph server puts in every run's config: the graph then knows a request started it.
SERVED = {"graph_id": "evident", "assistant_id": "00000000-0000-0000-0000-000000000000"}


TOPICS = ["parking permits", "badge renewal", "laptop returns", "desk booking", "canteen hours", "printer quotas",
          "visitor passes", "locker keys", "bike storage", "mail pickup", "room heating"]


class Pages(BaseRetriever):
    """The expense page and eleven others, whatever the query."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        expenses = Document(page_content="Expense reports must be submitted within 30 days after a trip ends.",
                            metadata={"url": "kb/expenses", "title": "Expenses"})
        others = [Document(page_content=f"Questions about {topic} go to the facilities desk on floor {i}.",
                           metadata={"url": f"kb/page-{i}", "title": topic.title()}) for i, topic in enumerate(TOPICS)]
        return [expenses, *others]


def _recording() -> tuple[Any, list[EvidentContext]]:
    """A graph over `Pages`, and the settings each query built its retriever with."""
    seen: list[EvidentContext] = []
    return build_graph(retriever_factory=lambda ctx: seen.append(ctx) or Pages()), seen


def configurable(**values: Any) -> dict[str, Any]:
    return {"configurable": values}


def test_configurable_sets_a_request_setting_locally_as_on_the_server() -> None:
    g, seen = _recording()
    local = g.invoke({"query": Q}, config=configurable(top_n=2, k=3))
    assert local["status"] == "answered" and len(local["documents"]) == 2 and (seen[-1].top_n, seen[-1].k) == (2, 3)
    by_context = g.invoke({"query": Q}, context={"top_n": 2, "k": 3})
    served = g.invoke({"query": Q}, context={"top_n": 2, "k": 3}, config=configurable(**SERVED))
    assert [d["url"] for d in by_context["documents"]] == [d["url"] for d in served["documents"]] == \
        [d["url"] for d in local["documents"]]
    assert len(g.invoke({"query": Q})["documents"]) == 8  # and without it, the default


@pytest.mark.parametrize("values", [{"top_n": 51}, {"k": 0}, {"drift": "anything"}, {"threshold": 2}])
def test_configurable_has_the_servers_bounds(values: dict[str, Any]) -> None:
    g, seen = _recording()
    local = g.invoke({"query": Q}, config=configurable(**values))
    assert local["status"] == "error" and seen == [] and local["documents"] == []
    # The message the server's 422 carries (evident/web/auth.py), and the graph's own on a served run.
    with pytest.raises(RequestSettingsError) as refused:
        check_request_settings(values)
    assert local["error"] == str(refused.value) and refused.value.status == 422
    if "top_n" in values:  # within the owner's bounds, so a served run's context reaches the graph
        served = g.invoke({"query": Q}, context=values, config=configurable(**SERVED))
        assert served["error"] == local["error"]


def test_configurable_never_sets_a_deployment_setting() -> None:
    """`configurable` is shared with LangGraph and the graph around EvidenT: other keys are left alone."""
    g, seen = _recording()
    out = g.invoke({"query": Q}, config=configurable(model="attacker", base_url="http://127.0.0.1:9/v1",
                                                     corpus=["/etc"], max_query_chars=10, user_id="u1"))
    assert out["status"] == "answered"
    assert seen[-1].model is None and "/etc" not in seen[-1].corpus and seen[-1].max_query_chars == 4000


def test_what_the_context_sets_wins_over_configurable() -> None:
    g, seen = _recording()
    g.invoke({"query": Q}, context={"top_n": 4}, config=configurable(top_n=2, k=3))
    assert (seen[-1].top_n, seen[-1].k) == (4, 3)
    g.invoke({"query": Q}, context=EvidentContext(top_n=5), config=configurable(top_n=2, k=3))
    assert (seen[-1].top_n, seen[-1].k) == (5, 3)
    g.invoke({"query": Q}, context=EvidentContext(), config=configurable(top_n=2))
    assert seen[-1].top_n == 2


def test_an_agents_configurable_reaches_evident_as_a_subgraph() -> None:
    g, seen = _recording()
    agent = StateGraph(MessagesState)
    agent.add_node("evident", g)
    agent.add_edge(START, "evident")
    agent.add_edge("evident", END)
    out = agent.compile().invoke({"messages": [HumanMessage(Q)]}, config=configurable(top_n=2))
    assert out["messages"][-1].additional_kwargs["status"] == "answered" and seen[-1].top_n == 2


def test_every_published_schema_lists_every_request_setting_with_its_bounds() -> None:
    context = graph.get_context_jsonschema()
    with warnings.catch_warnings():  # deprecated, and still what the server's config schema comes from
        warnings.simplefilter("ignore")
        config = graph.get_config_jsonschema()
    configurable_schema = config["$defs"][config["properties"]["configurable"]["$ref"].rsplit("/", 1)[-1]]
    # What the server shows as `config_schema` (langgraph_api renders the type of `configurable` this way).
    server_config = TypeAdapter(ContextWithDefaults).json_schema()
    for schema in (context, configurable_schema, server_config):
        assert set(schema["properties"]) == REQUEST_SETTINGS and schema["additionalProperties"] is False
        for name, field in schema["properties"].items():
            assert field["description"] == context["properties"][name]["description"]
            assert "default" in field
            if field.get("type") in ("integer", "number"):
                assert "minimum" in field and "maximum" in field, name
            else:
                assert field.get("enum"), name
    for name, cap in REQUEST_BOUNDS.items():
        if cap is not None:
            assert context["properties"][name]["maximum"] == cap
            assert f"at most {cap}" in context["properties"][name]["description"]
