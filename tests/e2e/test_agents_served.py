"""The served EvidenT in other agents, over real HTTP on 127.0.0.1, on `langgraph dev` and on Aegra
(tests/e2e/deployments.py), with a tokens file, over the examples and an HR page only `group:hr` may read: as an
MCP tool (evident/web/mcp.py) asked with the official `mcp` Python client, and as the LangChain tool over a
`RemoteGraph` inside a local agent (evident/agent/tool.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel.remote import RemoteGraph
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Tool

from evident.agent.artifact import EvidenceArtifact
from evident.agent.tool import evident_tool
from tests.e2e.corpus import HR_QUERY, SECRET_WORD, Q, hr_secured_env
from tests.e2e.deployments import SERVERS, deployment
from tests.e2e.dev_server import DevServer
from tests.support.agents import ScriptedModel, asking

TOKENS = {"hr-token": ("hana", ["hr"]), "staff-token": ("sam", ["staff"])}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "curl", "version": "0"}}}


@pytest.fixture(scope="module", params=SERVERS)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            examples: Path) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("mcp")
    with deployment(request, root / "server", hr_secured_env(root, examples, TOKENS)) as server:
        yield server


def _session(server: DevServer, token: str | None, *, mode: str = "auto") -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode=mode)  # type: ignore[arg-type]


def _ask(server: DevServer, token: str, arguments: dict[str, Any], *, mode: str = "auto") -> tuple[list[Tool],
                                                                                                    CallToolResult]:
    async def go() -> tuple[list[Tool], CallToolResult]:
        async with _session(server, token, mode=mode) as client:
            tools = (await client.list_tools()).tools
            return tools, await client.call_tool("evident_search", arguments)

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 protocol, and the initialize handshake
def test_the_tool_is_listed_and_answers_with_its_citations(secured: DevServer, mode: str) -> None:
    tools, result = _ask(secured, "staff-token", {"query": Q}, mode=mode)
    [tool] = tools
    assert tool.name == "evident_search" and set(tool.input_schema["properties"]) == {"query"}
    assert tool.output_schema is not None and "citations" in tool.output_schema["properties"]
    assert not result.is_error
    artifact = EvidenceArtifact.model_validate(result.structured_content)
    assert artifact.status == "answered" and "30 days" in artifact.answer and artifact.citations
    for citation in artifact.citations:
        assert citation.spans and citation.quote and citation.content_hash and citation.url.startswith("https://")
    [text] = result.content
    assert text.type == "text" and "[1]" in text.text and "\nSources:\n[1] " in text.text  # type: ignore[union-attr]


def test_no_token_no_tool(secured: DevServer) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic aHI6aHI="}):
        response = httpx.post(f"{secured.url}/mcp", json=INITIALIZE, timeout=30,
                              headers={"Accept": "application/json, text/event-stream", **headers})
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    with pytest.raises(ExceptionGroup) as refused:  # the official client cannot even connect
        _ask(secured, "", {"query": Q})
    assert refused.group_contains(MCPError, depth=None)


def test_the_token_decides_what_the_tool_reads(secured: DevServer) -> None:
    _, hr = _ask(secured, "hr-token", {"query": HR_QUERY})
    assert SECRET_WORD in hr.content[0].text  # type: ignore[union-attr]
    assert any(c["url"] == "https://hr.example/code-words" for c in hr.structured_content["citations"])
    # Sam is staff: neither the page nor its word reach him, whatever the call's arguments say.
    for arguments in ({"query": HR_QUERY}, {"query": HR_QUERY, "principal": {"user": "hana", "groups": ["hr"]}}):
        _, staff = _ask(secured, "staff-token", arguments)
        seen = json.dumps(staff.model_dump(mode="json"))
        assert SECRET_WORD not in seen and "hr.example/code-words" not in seen
        assert staff.structured_content["status"] in ("insufficient", "answered")


def _remote_agent_call(server: DevServer, token: str, question: str) -> ToolMessage:
    from langchain.agents import create_agent

    remote = RemoteGraph("evident", url=server.url, headers={"Authorization": f"Bearer {token}"})
    # Bound to hana, and on a local thread: the remote server's token decides, and the thread stays local.
    tool = evident_tool(remote, principal={"user": "hana", "groups": ["hr"]})
    agent = create_agent(ScriptedModel(messages=asking(tool.name, question)), [tool], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("Ask EvidenT.")]}, {"configurable": {"thread_id": "local-1"}})
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    return message


def test_the_tool_over_a_remote_graph_keeps_its_citations_and_the_tokens_permissions(secured: DevServer) -> None:
    hr = _remote_agent_call(secured, "hr-token", HR_QUERY)
    artifact = EvidenceArtifact.model_validate(hr.artifact)
    assert artifact.status == "answered" and SECRET_WORD in hr.text
    [cited] = [c for c in artifact.citations if c.url == "https://hr.example/code-words"]
    assert cited.spans and SECRET_WORD in cited.quote and cited.content_hash
    staff = _remote_agent_call(secured, "staff-token", HR_QUERY)
    seen = staff.text + json.dumps(staff.artifact)
    assert staff.artifact["status"] in ("insufficient", "answered") and SECRET_WORD not in seen
    assert "hr.example/code-words" not in seen
