"""EvidenT as a LangChain tool an agent calls: `evident_tool(...)`.

The model fills one argument, the question. The tool answers with `response_format="content_and_artifact"`:
the `ToolMessage.content` is the answer with numbered marks and a short sources list (evident/agent/evidence.py),
bounded in size; the `ToolMessage.artifact` is the `EvidenceArtifact` as JSON, with every citation's url,
heading path, spans, quote and the content hash of the source text.

Who is asking comes from the run, never from the model: on a LangGraph server (a served agent, the MCP
endpoint) the graph reads the authenticated user of the run's config (`configurable["langgraph_auth_user"]`)
itself, as it does for any served run; elsewhere it is the principal the developer binds when building the
tool, and without one the caller is anonymous and sees public documents only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, BaseCallbackManager, CallbackManagerForToolRun
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import patch_config
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.pregel import Pregel
from pydantic import BaseModel, Field

from evident.agent.evidence import MAX_CONTENT_CHARS, evidence_artifact, tool_content
from evident.connectors.acl import coerce_principal
from evident.context import EvidentContext
from evident.models import Principal

DEFAULT_NAME = "evident_search"
DEFAULT_DESCRIPTION = (
    "Answer a question from the organisation's own documents. Every sentence of the answer is checked "
    "against the exact text of the document it cites and carries a numbered mark [1], [2], … that the "
    "Sources list resolves. Ask one self-contained question (the tool does not see the conversation); "
    "quote its marks when you use its sentences."
)


class EvidentQuery(BaseModel):
    """The tool's only argument: what the model asks."""

    query: str = Field(min_length=1, description="The question, self-contained: name what it is about, "
                       "since the tool does not see the conversation.")


ToolOutput = tuple[str, dict[str, Any]]


def _served(config: RunnableConfig | None) -> bool:
    """Whether the LangGraph server authenticated this run: then the graph reads its user itself."""
    configurable = (config or {}).get("configurable") or {}
    return configurable.get("langgraph_auth_user") is not None


class EvidentTool(BaseTool):
    """EvidenT as a tool: see `evident_tool`."""

    name: str = DEFAULT_NAME
    description: str = DEFAULT_DESCRIPTION
    args_schema: type[BaseModel] = EvidentQuery
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    graph: Runnable[Any, Any] = Field(exclude=True)
    context: EvidentContext | None = Field(None, exclude=True)
    principal: Principal | None = Field(None, exclude=True)
    max_chars: int = Field(MAX_CONTENT_CHARS, ge=200)

    def _inputs(self, query: str, config: RunnableConfig | None) -> dict[str, Any]:
        inputs: dict[str, Any] = {"query": query}
        # A remote graph's own server decides who asks (the RemoteGraph's token): it would ignore a principal.
        if self.principal is not None and isinstance(self.graph, Pregel) and not _served(config):
            inputs["principal"] = self.principal.model_dump(mode="json")
        return inputs

    def _config(self, config: RunnableConfig, callbacks: BaseCallbackManager | None) -> RunnableConfig:
        if isinstance(self.graph, Pregel):  # a run inside the agent's: its events and traces nest there
            return patch_config(config, callbacks=callbacks) if callbacks is not None else config
        # A remote graph gets no more than the callbacks: the agent's thread id and LangGraph's own keys
        # would name a thread of the remote server, or be refused by it.
        return {"callbacks": callbacks} if callbacks is not None else {}

    def _options(self) -> dict[str, Any]:
        return {} if self.context is None else {"context": self.context}

    def _answer(self, query: str, state: Any) -> ToolOutput:
        if not isinstance(state, Mapping):
            state = {"status": "error", "error": f"the graph returned {type(state).__name__}, not its state"}
        artifact = evidence_artifact(query, state)
        return tool_content(artifact, self.max_chars), artifact.model_dump(mode="json")

    def _failed(self, query: str, exc: Exception) -> ToolOutput:
        return self._answer(query, {"status": "error", "error": f"{type(exc).__name__}: {exc}"})

    def _run(self, query: str, config: RunnableConfig,
             run_manager: CallbackManagerForToolRun | None = None) -> ToolOutput:
        child = self._config(config, run_manager.get_child() if run_manager else None)
        try:
            state = self.graph.invoke(self._inputs(query, config), config=child, **self._options())
        except GraphBubbleUp:  # an interrupt or a parent command: LangGraph's own control flow
            raise
        except Exception as exc:  # the model gets a clear text, the agent goes on
            return self._failed(query, exc)
        return self._answer(query, state)

    async def _arun(self, query: str, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None) -> ToolOutput:
        child = self._config(config, run_manager.get_child() if run_manager else None)
        try:
            state = await self.graph.ainvoke(self._inputs(query, config), config=child, **self._options())
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._failed(query, exc)
        return self._answer(query, state)


def evident_tool(
    graph: Runnable[Any, Any] | None = None,
    *,
    name: str = DEFAULT_NAME,
    description: str = DEFAULT_DESCRIPTION,
    context: EvidentContext | None = None,
    principal: Principal | Mapping[str, Any] | None = None,
    max_chars: int = MAX_CONTENT_CHARS,
) -> BaseTool:
    """EvidenT as a LangChain tool whose only argument is the question.

    `graph`: the EvidenT graph to ask (`build_graph(...)`, a `RemoteGraph` of a served EvidenT); by default
    the compiled default graph (`evident.graph.graph`). `context`: the `EvidentContext` of every call
    (corpus, sources, models); by default the graph's own defaults (`evident.toml`, environment).
    `principal`: who is asking when the run is not a served one (`Principal` or its dict); on a LangGraph
    server the authenticated user of the run always decides, whatever is bound here, and a `RemoteGraph`
    is asked as its own token's user (the principal is not sent).
    `max_chars`: the most characters the model reads (the artifact always holds the whole answer).

    The tool returns `(content, artifact)`: the answer with `[n]` marks and a `Sources:` list, and
    `EvidenceArtifact(...).model_dump(mode="json")` (evident/agent/artifact.py). A query that fails gives
    the model a text that says so, and the artifact's `status` is `error`.
    """
    if graph is None:
        from evident.graph import graph as default_graph  # compiled on first use, not at import

        graph = default_graph
    if isinstance(graph, Pregel) and graph.checkpointer is None:
        # Not the agent's checkpointer: EvidenT's state (documents included) would be kept in the agent's
        # thread at every step of every call. The tool message's artifact is what the thread keeps.
        graph = graph.copy({"checkpointer": False})
    return EvidentTool(name=name, description=description, graph=graph, context=context,
                       principal=coerce_principal(dict(principal) if isinstance(principal, Mapping) else principal),
                       max_chars=max_chars)
