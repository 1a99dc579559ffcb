"""Threads for source calls under `invoke`, shared by all queries."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class SourceWorkers:
    """Threads for source calls, shared by all queries so that a query does not pay for starting them.

    A source stuck past its deadline keeps its thread until its own I/O timeout ends it. So that such
    threads can never make other queries wait in a queue, a query whose sources do not all find an
    idle shared thread gets a pool of its own, dropped (not waited for) when the query is done.
    """

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._busy = 0
        self._pool: ThreadPoolExecutor | None = None
        os.register_at_fork(after_in_child=self._forget)  # threads do not survive a fork

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._pool = None

    def submit_all(self, calls: list[Callable[[], Any]]) -> tuple[list[Future[Any]], ThreadPoolExecutor | None]:
        with self._lock:
            shared = self._busy + len(calls) <= self.size
            if shared:
                self._busy += len(calls)
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="evident-source")
                pool = self._pool
        if shared:
            futures = [pool.submit(self._run, call) for call in calls]
            for future in futures:  # a call cancelled before it started never reaches _run's finally
                future.add_done_callback(lambda f: self._release() if f.cancelled() else None)
            return futures, None
        overflow = ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="evident-source-extra")
        return [overflow.submit(call) for call in calls], overflow

    def _run(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1


WORKERS = SourceWorkers()
