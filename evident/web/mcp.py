"""The served EvidenT as an MCP tool: `POST /mcp`, the Model Context Protocol's streamable HTTP transport.

One tool, `evident_search`, whose only argument is the question. A call answers as the LangChain tool does
(evident/agent/tool.py): the text content is the answer with `[n]` marks and its sources, the structured
content is the `EvidenceArtifact` (its JSON schema is the tool's `outputSchema`), and a failed query is a
result with `isError` whose artifact says `status: "error"`.

Behind the same authentication as the API: `/mcp` is on the route allowlist with `token` access
(evident/web/routes.py), so `RequestGate` refuses a request without a valid token (401) before the MCP
server reads it; the call then identifies its caller again from the same request (the MCP server runs
it in a task of its own) and asks the graph as that user, the way the LangGraph server hands a served
run its `langgraph_auth_user`: documents the caller may not see never reach the answer. A request
cannot choose settings: the deployment's apply, as for any served run.

The transport is stateless, with JSON responses (no session to keep, no event stream): any replica
answers any call, as for Aegra's several replicas. It is the `mcp` package's server (not LangGraph's own
`/mcp`, which `langgraph.json` disables: it lists every input of the graph, `principal` among them, answers
with the whole state as Python text and is not served by Aegra).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

import evident
from evident.agent.artifact import EvidenceArtifact
from evident.agent.tool import DEFAULT_DESCRIPTION, DEFAULT_NAME, EvidentQuery, evident_tool
from evident.web.auth import direct_client, identify
from evident.web.gate import respond
from evident.web.settings import server_settings

log = logging.getLogger(__name__)

PATH = "/mcp"
SERVED_GRAPH = "evident"  # the graph of langgraph.json whose deployment settings a call runs with

TOOL = Tool(
    name=DEFAULT_NAME, title="EvidenT search", description=DEFAULT_DESCRIPTION,
    input_schema=EvidentQuery.model_json_schema(), output_schema=EvidenceArtifact.model_json_schema(),
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False),
)


@functools.cache
def _tool() -> BaseTool:
    """The tool over the default graph, made on the first call (the graph compiles once)."""
    return evident_tool()


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _caller(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The identity of the HTTP request that carries this call (the gate admitted it with the same rules)."""
    request = ctx.request
    headers = dict(getattr(request, "headers", None) or {})
    client = direct_client(getattr(request, "scope", {}).get("client"), headers)
    return identify(headers.get("authorization"), client, server_settings())


async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(tools=[TOOL])


async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
    if params.name != TOOL.name:
        return _error(f"unknown tool {params.name!r}: this server has {TOOL.name!r}")
    try:
        query = EvidentQuery.model_validate(params.arguments or {}).query
    except ValidationError as exc:
        problem = exc.errors()[0]
        return _error(f"invalid arguments: {'.'.join(map(str, problem['loc'])) or 'arguments'}: {problem['msg']}")
    # Reading the tokens file blocks: not on the event loop (the dev server refuses blocking calls there).
    user = await asyncio.to_thread(_caller, ctx)
    config: RunnableConfig = {"configurable": {"langgraph_auth_user": user, "graph_id": SERVED_GRAPH}}
    message = await _tool().ainvoke(
        {"type": "tool_call", "id": str(ctx.request_id or "mcp"), "name": TOOL.name, "args": {"query": query}},
        config=config)
    assert isinstance(message, ToolMessage)  # a tool call gives a ToolMessage (content and artifact)
    artifact = message.artifact if isinstance(message.artifact, dict) else {}
    return CallToolResult(content=[TextContent(type="text", text=message.text)], structured_content=artifact,
                          is_error=artifact.get("status") == "error")


SERVER: Server[Any] = Server("evident", version=evident.__version__, title="EvidenT",
                             instructions="Answers from the organisation's documents, every sentence cited to an "
                             "exact span of its source.", on_list_tools=list_tools, on_call_tool=call_tool)


class McpEndpoint:
    """The ASGI endpoint of `/mcp`: the session manager that the app's lifespan runs (`running`)."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            await respond(send, 503, "the MCP endpoint is not running")
            return
        await self.manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve `/mcp` while the block runs (a manager runs once: each lifespan makes its own)."""
        # Host and Origin are `BrowserGuard`'s to check, for every route alike (evident/web/browser.py).
        manager = StreamableHTTPSessionManager(
            SERVER, json_response=True, stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None


endpoint = McpEndpoint()
