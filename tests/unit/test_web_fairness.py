"""Per-user fairness (evident/web/fairness.py) without a server: the flood against `langgraph dev` and
Aegra is tests/e2e/test_served_surface.py::test_one_users_flood_leaves_the_others_answered, and
`python benchmarks/fairness.py` measures the other user's answer time under it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evident.web import fairness
from evident.web.fairness import RunSlots, TooManyRuns, created_runs


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
