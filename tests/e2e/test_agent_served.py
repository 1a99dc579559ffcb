"""`evident_agent` (langgraph.json's second graph) served for real, with authentication: `langgraph dev` and
Aegra on PostgreSQL (tests/e2e/deployments.py), over real HTTP on 127.0.0.1.

No chat model is configured, so the agent is the offline one: it asks the EvidenT tool the question and answers
with the tool's content, which `verify_answer` checks. The deployment's tokens file names two callers; the
HR page is readable by `group:hr` alone, and the agent's tool must hold that as the `evident` graph does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.e2e.corpus import HR_QUERY, SECRET_WORD, Q, hr_secured_env
from tests.e2e.deployments import SERVERS, deployment
from tests.e2e.dev_server import DevServer

TOKENS = {"hr-token-1": ("hana", ["hr"]), "staff-token-2": ("sam", ["staff"])}
AGENT = "evident_agent"


@pytest.fixture(scope="module", params=SERVERS)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            examples: Path) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("agent-secured")
    with deployment(request, root / "server", hr_secured_env(root, examples, TOKENS)) as server:
        yield server


def ask(server: DevServer, question: str, token: str) -> dict[str, object]:
    client = get_sync_client(url=server.url, headers={"Authorization": f"Bearer {token}"})
    out = client.runs.wait(None, AGENT, input={"messages": [{"role": "user", "content": question}]})
    assert isinstance(out, dict), out
    return out


def test_the_agent_answers_one_question_with_its_answer_checked(secured: DevServer) -> None:
    out = ask(secured, Q, "staff-token-2")
    kinds = [m["type"] for m in out["messages"]]  # type: ignore[union-attr, index]
    assert kinds == ["human", "ai", "tool", "ai"]
    tool_message, final = out["messages"][2], out["messages"][-1]  # type: ignore[index]
    assert tool_message["artifact"]["kind"] == "evident.evidence/v1"
    assert "30 days" in final["content"] and "[1]" in final["content"]
    check = out["answer_check"]
    assert isinstance(check, dict) and check["evidence_calls"] == 1
    assert check["sentences"] and {s["status"] for s in check["sentences"]} == {"supported"}
    assert all(s["spans"] and s["quote"] for s in check["sentences"])
    assert final["response_metadata"]["evident_check"]["supported"] == len(check["sentences"])


def test_the_agent_is_refused_without_a_token(secured: DevServer) -> None:
    body = {"assistant_id": AGENT, "input": {"messages": [{"role": "user", "content": Q}]}}
    response = httpx.post(f"{secured.url}/runs/wait", json=body, timeout=60)
    assert response.status_code == 401
    assert response.headers.get("www-authenticate", "").lower().startswith("bearer")
    wrong = httpx.post(f"{secured.url}/runs/wait", json=body, headers={"Authorization": "Bearer nope"}, timeout=60)
    assert wrong.status_code == 401


def test_the_agents_tool_reads_as_the_authenticated_caller(secured: DevServer) -> None:
    staff = ask(secured, HR_QUERY, "staff-token-2")
    assert SECRET_WORD not in str(staff)
    hr = ask(secured, HR_QUERY, "hr-token-1")
    assert SECRET_WORD in hr["messages"][-1]["content"]  # type: ignore[index]


def test_the_agent_is_listed_beside_evident_with_its_schemas(secured: DevServer) -> None:
    client = get_sync_client(url=secured.url, headers={"Authorization": "Bearer staff-token-2"})
    graphs = {a["graph_id"] for a in client.assistants.search(limit=10)}
    assert {"evident", AGENT} <= graphs
    (assistant,) = client.assistants.search(graph_id=AGENT)
    schemas = httpx.get(f"{secured.url}/assistants/{assistant['assistant_id']}/schemas", timeout=30,
                        headers={"Authorization": "Bearer staff-token-2"})
    assert schemas.status_code == 200, schemas.text
    assert {"messages", "answer_check"} <= set(schemas.json()["state_schema"]["properties"])
    drawn = client.assistants.get_graph(assistant["assistant_id"])  # what Studio draws
    assert {"agent", "tools", "verify_answer"} <= {node["id"] for node in drawn["nodes"]}
