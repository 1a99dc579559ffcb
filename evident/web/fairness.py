"""Per-user fairness: at most `max_active_runs` runs of one user pending or running at once.

One user's flood (150 background runs in under a second, or a `/runs/batch` of 300) would otherwise fill
the server's run queue, and every other user's question would wait behind it. `RequestGate`
(evident/web/gate.py) admits a request that creates runs only while the caller's runs stay within the
limit, and answers `429` with `Retry-After` past it, before the run exists. It holds for authenticated
users: without authentication every caller is the one `anonymous` user (this machine's, or with
`--insecure` everyone's alike), and there is no other user to be fair to.

What counts, per server process (per replica on Aegra, so N replicas admit up to N times the limit):

- a run created by a request still open (`/runs/wait`, `/runs/stream` and a thread's, which last as
  long as their run, or until the client leaves);
- a background run (`/runs`, a thread's `/runs`, each run of `/runs/batch`) from its creation until the
  API says it is no longer `pending` or `running` (read as the caller, at the user's next request).

Admission is one step per user (a lock), so a burst of requests sent together counts as it arrives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope

from evident.web.inprocess import read_as_caller

RETRY_AFTER_S = 2
ACTIVE = ("pending", "running")


class TooManyRuns(Exception):
    """The caller's runs are at the limit: 429, with `Retry-After`."""

    def __init__(self, active: int, wanted: int, limit: int) -> None:
        more = f", and this request would add {wanted}" if wanted > 1 else ""
        super().__init__(f"you have {active} runs pending or running{more} (the limit is {limit} per user): "
                         "try again when one of them ends")


@dataclass
class _Runs:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    open: int = 0  # admitted by a request not answered yet
    background: set[tuple[str, str]] = field(default_factory=set)  # (thread_id, run_id) until they end


class RunSlots:
    """The runs each user has in flight on this process."""

    def __init__(self) -> None:
        self._users: dict[str, _Runs] = {}

    async def admit(self, user: str, wanted: int, limit: int, scope: Scope) -> None:
        """Reserve `wanted` runs for `user`, or raise `TooManyRuns`. Every admission is followed by
        `release` (with the background runs it created)."""
        runs = self._users.setdefault(user, _Runs())
        async with runs.lock:
            if runs.open + len(runs.background) + wanted > limit:
                await _forget_ended(runs, scope)
            active = runs.open + len(runs.background)
            if active + wanted > limit:
                raise TooManyRuns(active, wanted, limit)
            runs.open += wanted

    def release(self, user: str, wanted: int, created: Iterable[tuple[str, str]]) -> None:
        runs = self._users[user]
        runs.open -= wanted
        runs.background.update(created)

    def active(self, user: str) -> int:
        runs = self._users.get(user)
        return 0 if runs is None else runs.open + len(runs.background)


async def _forget_ended(runs: _Runs, scope: Scope) -> None:
    for thread_id, run_id in list(runs.background):
        found = await read_as_caller(scope, f"/threads/{thread_id}/runs/{run_id}")
        if not isinstance(found, dict) or found.get("status") not in ACTIVE:  # ended, or gone with its thread
            runs.background.discard((thread_id, run_id))


def created_runs(body: bytes) -> list[tuple[str, str]]:
    """(thread_id, run_id) of the runs a creation route answered with (one run, or a batch's list)."""
    try:
        value: Any = json.loads(body)
    except ValueError:
        return []
    runs = value if isinstance(value, list) else [value]
    return [(str(run["thread_id"]), str(run["run_id"])) for run in runs
            if isinstance(run, dict) and run.get("thread_id") and run.get("run_id")]
