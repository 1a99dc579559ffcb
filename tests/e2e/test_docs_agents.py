"""Every Python example of docs/agents.md runs as written, in order, in one namespace, from the repository's root.

Its servers are real and on 127.0.0.1: a `langgraph dev` deployment of the examples whose tokens file holds
`my-token` (the page's `SERVER` is rewritten to its address), and a scripted OpenAI-compatible chat model
(`OPENAI_BASE_URL`) that calls the tool with the user's question, then answers with what the tool returned.
EvidenT itself runs offline, as everywhere in the tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import dev_server
from tests.e2e.corpus import server_env, tokens_file
from tests.e2e.dev_server import DevServer
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "agents.md"
DOCUMENTED_SERVER = "http://127.0.0.1:2024"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def page_examples() -> list[str]:
    return _BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def agent_model(request: ChatRequest) -> Reply:
    """A chat model that asks the tool it was given the user's question, then answers with the tool's text."""
    last = request.messages[-1]
    if last.get("role") == "tool":
        return Reply(content=str(last.get("content")))
    [tool] = [t["function"]["name"] for t in request.tools if t["function"]["name"] == "evident_search"]
    return Reply(tool_calls=[{"name": tool, "arguments": json.dumps({"query": str(last.get("content"))})}])


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer(agent_model) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, examples: Path) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("docs-agents")
    env = server_env(root, examples,
                     EVIDENT_AUTH_TOKENS_FILE=str(tokens_file(root / "tokens.json", {"my-token": ("ana", [])})))
    with dev_server.running(root / "server", env=env) as started:
        yield started


def test_the_page_has_an_example_for_each_way_in(server: DevServer) -> None:
    text = "\n".join(page_examples())
    for used in ("evident_tool(", "create_agent(", "verify_answer(", "verify_answer_node", "evident_agent",
                 "StateGraph(MessagesState)", "RemoteGraph(", "/mcp", "get_sync_client("):
        assert used in text, used


def test_every_python_example_of_the_page_runs(server: DevServer, model: OpenAIServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    namespace: dict[str, Any] = {"__name__": "docs_agents"}
    printed = io.StringIO()
    for i, code in enumerate(page_examples()):
        with contextlib.redirect_stdout(printed):
            exec(compile(code.replace(DOCUMENTED_SERVER, server.url), f"docs/agents.md example {i + 1}", "exec"),
                 namespace)
    out = printed.getvalue()
    # What the page's comments say each example prints.
    assert "Sources:\n[1] " in out and "30 days" in out
    assert "contradicted\n[('45', '30')]\n" in out
    assert "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date. [1]" in out
    assert "{'supported'}" in out
    assert namespace["remote_tool"].name == "evident_search"
    assert namespace["message"].artifact["status"] == "answered"
    assert namespace["artifact"]["citations"] and namespace["served"]["answer_check"]["sentences"]
    assert namespace["out"]["messages"][-1].content.count("[https://") >= 1  # the subgraph's answer
    assert any(r.tools for r in model.requests)  # the agents asked the scripted model, with the tool
