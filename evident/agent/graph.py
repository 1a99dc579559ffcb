"""`evident_agent`: a chat model that asks EvidenT, then `verify_answer` on its last word (DESIGN §3c).

    START → agent ─┬─ tool calls → tools → agent
                   └─ an answer  → verify_answer → END

`agent` is a chat model bound to the EvidenT tool (evident/agent/tool.py); `tools` runs the calls
(LangGraph's `ToolNode`), each returning the answer with `[n]` marks and the `EvidenceArtifact`;
`verify_answer` checks the final answer against those artifacts and writes its checked form to `messages`,
and the check to `answer_check` (evident/agent/verify_answer.py). The model's final answer is a draft until
then: it is kept in `draft` (not in `messages`), and the model call is tagged `nostream`, so a reader of
`stream_mode="messages"` sees the checked answer only, never a sentence `verify_answer` takes back.

With no chat model configured (offline, the default) the agent is deterministic: it asks the tool the last
human message and answers with the tool's content, which `verify_answer` then checks like any answer. A
configured model that fails (unreachable, an error reply) gets the same offline turn in its place.
The graph takes the same `context` as EvidenT's (`EvidentContext`); served, the same authentication
applies (langgraph.json's `auth` covers every graph), and the tool's EvidenT run reads the
authenticated caller from the run, as the `evident` graph does.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final, Literal

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from evident.agent.state import AgentState
from evident.agent.tool import evident_tool
from evident.agent.verify_answer import verify_answer_node
from evident.context import EvidentContext
from evident.llm.models import DEFAULT_MODELS, Models
from evident.models import INSUFFICIENT_ANSWER
from evident.prompts.agent import AGENT_SYSTEM
from evident.request_settings import ContextWithDefaults, file_defaults, run_settings

log = logging.getLogger(__name__)

AGENT: Final = "agent"
TOOLS: Final = "tools"
VERIFY_ANSWER: Final = "verify_answer"
MAX_TOOL_ROUNDS = 4  # tool-calling turns of the model per question; then it must answer


_MODEL_CALL: RunnableConfig = {"tags": ["nostream"], "run_name": "agent_model"}


AgentGraph = CompiledStateGraph[AgentState, EvidentContext, AgentState, AgentState]


def _this_turn(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The messages after the last human message (what the agent did for the current question)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return messages[last + 1:]


def _offline_turn(messages: list[AnyMessage], tool: BaseTool) -> AIMessage:
    """No model: ask the tool the last human message, then answer with what it returned (whatever it returned,
    so that a failed call ends the turn rather than repeating it)."""
    turn = _this_turn(messages)
    answered = [m for m in turn if isinstance(m, ToolMessage)]
    if answered:
        return AIMessage(answered[-1].text)
    question = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    if not question.strip():
        return AIMessage(INSUFFICIENT_ANSWER)
    call = {"name": tool.name, "args": {"query": question}, "id": f"evident-{len(messages)}", "type": "tool_call"}
    return AIMessage("", tool_calls=[call])


def _turn(reply: AIMessage) -> dict[str, Any]:
    """A tool call joins the conversation; an answer waits in `draft` for `verify_answer`."""
    return {"messages": [reply], "draft": None} if reply.tool_calls else {"draft": reply.model_dump()}


def _agent(state: AgentState, runtime: Runtime[EvidentContext], *, models: Models, tool: BaseTool) -> dict[str, Any]:
    return _turn(_reply(state, runtime, models=models, tool=tool))


def _reply(state: AgentState, runtime: Runtime[EvidentContext], *, models: Models, tool: BaseTool) -> AIMessage:
    ctx = run_settings(runtime)
    messages = list(state["messages"])
    if not models.enabled(ctx):
        return _offline_turn(messages, tool)
    model: Runnable[Any, Any] = models.get(ctx, "generate")
    rounds = sum(1 for m in _this_turn(messages) if isinstance(m, AIMessage) and m.tool_calls)
    if rounds < MAX_TOOL_ROUNDS:
        model = model.bind_tools([tool])  # type: ignore[attr-defined]  # every chat model of LangChain has it
    try:
        reply = model.invoke([SystemMessage(AGENT_SYSTEM.format(tool=tool.name)), *messages], config=_MODEL_CALL)
    except GraphBubbleUp:  # an interrupt: LangGraph's own control flow
        raise
    except Exception as exc:  # a model that fails or is unreachable: the question is still answered, offline
        log.warning("evident_agent: the chat model failed (%s: %s); answering offline", type(exc).__name__, exc)
        return _offline_turn(messages, tool)
    return reply if isinstance(reply, AIMessage) else AIMessage(str(getattr(reply, "content", reply)))


def route_after_agent(state: AgentState) -> Literal["tools", "verify_answer"]:
    return VERIFY_ANSWER if state.get("draft") is not None else TOOLS


def _verify_draft(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any]:
    """`verify_answer` on the conversation with its draft answer last; only the checked answer is written."""
    thread = {"messages": [*state["messages"], *convert_to_messages([state.get("draft") or {}])]}
    return {**verify_answer_node(thread, runtime), "draft": None}  # type: ignore[arg-type]


def build_agent_graph(
    *,
    chat_model: Any = None,
    evident: Runnable[Any, Any] | None = None,
    tool: BaseTool | None = None,
    name: str = "evident_agent",
    checkpointer: Any = None,
) -> AgentGraph:
    """Compile the agent.

    `chat_model`: any LangChain chat model that supports `bind_tools` (or a callable `EvidentContext ->
    chat model`); by default one is built from the run's settings when a model is configured, and without
    one the agent runs offline (module docstring). `evident`: the EvidenT graph its tool asks (by default
    the compiled default graph; a `RemoteGraph` works too). `tool`: a tool built by `evident_tool(...)` to
    use instead (its own graph, context or principal). `checkpointer`: to keep threads.
    """
    file_defaults()  # read evident.toml now, not inside a server's event loop
    models = DEFAULT_MODELS if chat_model is None else Models(chat_model)
    chosen = tool if tool is not None else evident_tool(evident)
    builder = StateGraph[AgentState, EvidentContext, AgentState, AgentState](
        AgentState, context_schema=ContextWithDefaults)
    builder.add_node(AGENT, partial(_agent, models=models, tool=chosen))
    builder.add_node(TOOLS, ToolNode([chosen]))
    builder.add_node(VERIFY_ANSWER, _verify_draft)
    builder.add_edge(START, AGENT)
    builder.add_conditional_edges(AGENT, route_after_agent, [TOOLS, VERIFY_ANSWER])
    builder.add_edge(TOOLS, AGENT)
    builder.add_edge(VERIFY_ANSWER, END)
    return builder.compile(name=name, checkpointer=checkpointer)


graph = build_agent_graph()
"""The compiled `evident_agent` of langgraph.json."""
