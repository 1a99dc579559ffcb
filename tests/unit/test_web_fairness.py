"""Per-user fairness (evident/web/fairness.py) without a server: the flood against `langgraph dev` and
Aegra is tests/e2e/test_served_surface.py::test_one_users_flood_leaves_the_others_answered, and
`python benchmarks/fairness.py` measures the other user's answer time under it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from evident.web import fairness, gate
from evident.web.auth import token_digest
from evident.web.fairness import RunSlots, TooManyRuns, created_runs
from evident.web.settings import ServerSettings


def test_a_users_runs_are_counted_until_they_end(monkeypatch: pytest.MonkeyPatch) -> None:
    statuses = {"r1": "running", "r2": "pending"}
    asked: list[str] = []

    async def read(scope: Any, path: str) -> Any:
        asked.append(path)
        run = path.rsplit("/", 1)[1]
        return {"status": statuses[run]} if run in statuses else None

    monkeypatch.setattr(fairness, "read_as_caller", read)

    async def scenario() -> None:
        slots = RunSlots()
        await slots.admit("alice", 1, 3, {})
        slots.release("alice", 1, [("t1", "r1")])  # a background run: counted until it ends
        await slots.admit("alice", 1, 3, {})
        slots.release("alice", 1, [("t2", "r2")])
        await slots.admit("alice", 1, 3, {})  # an open /runs/wait: counted while it lasts
        assert slots.active("alice") == 3 and asked == []  # within the limit: no run was looked up
        with pytest.raises(TooManyRuns, match=r"you have 3 runs pending or running \(the limit is 3 per user\)"):
            await slots.admit("alice", 1, 3, {})
        await slots.admit("bob", 3, 3, {})  # another user's share is their own
        statuses["r1"] = "success"  # one of alice's runs ended: her next run is taken
        await slots.admit("alice", 1, 3, {})
        assert slots.active("alice") == 3  # r1 is no longer counted
        with pytest.raises(TooManyRuns, match="would add 2"):
            await slots.admit("alice", 2, 3, {})

    asyncio.run(scenario())


def test_a_burst_is_counted_as_it_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    async def read(scope: Any, path: str) -> Any:
        return {"status": "pending"}

    monkeypatch.setattr(fairness, "read_as_caller", read)

    async def burst() -> list[bool]:
        slots = RunSlots()

        async def one() -> bool:
            try:
                await slots.admit("alice", 1, 4, {})
            except TooManyRuns:
                return False
            await asyncio.sleep(0.01)  # the request is served; its run stays open
            return True

        return await asyncio.gather(*(one() for _ in range(20)))

    assert sum(asyncio.run(burst())) == 4


def test_created_runs_are_read_from_the_answer() -> None:
    assert created_runs(b'{"run_id": "r", "thread_id": "t", "status": "pending"}') == [("t", "r")]
    assert created_runs(b'[{"run_id": "a", "thread_id": "t"}, {"run_id": "b", "thread_id": "u"}]') == [
        ("t", "a"), ("u", "b")]
    assert created_runs(b"not json") == [] and created_runs(b'{"detail": "x"}') == []


@pytest.mark.parametrize("authenticated", [True, False])
def test_the_gate_refuses_a_run_past_the_users_share_only_between_users(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, authenticated: bool) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps([{"sha256": token_digest("good"), "user": "u"}]), encoding="utf-8")
    settings = ServerSettings(tokens_file=tokens if authenticated else None, max_active_runs=1)
    monkeypatch.setattr(gate, "server_settings", lambda: settings)

    async def scenario() -> tuple[int, int, dict[str, str]]:
        entered, release = asyncio.Event(), asyncio.Event()

        async def slow(request: Request) -> JSONResponse:
            entered.set()
            await release.wait()
            return JSONResponse({"status": "answered"})

        app = Starlette(routes=[Route("/runs/wait", slow, methods=["POST"])], middleware=[Middleware(gate.RequestGate)])
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:2024",
                                     headers={"Authorization": "Bearer good"}) as client:
            body = {"assistant_id": "evident", "input": {"query": "q"}}
            first = asyncio.create_task(client.post("/runs/wait", json=body))
            await entered.wait()  # the first run is open
            second = asyncio.create_task(client.post("/runs/wait", json=body))
            if authenticated:  # refused while the first is open, without waiting for it
                await asyncio.wait({second}, timeout=30)
                assert second.done()
            release.set()
            answered, other = await first, await second
        return answered.status_code, other.status_code, dict(other.headers)

    first, second, headers = asyncio.run(scenario())
    assert first == 200
    if authenticated:
        assert second == 429 and headers["retry-after"] == "2"
    else:
        assert second == 200  # one anonymous caller: nobody to share with
