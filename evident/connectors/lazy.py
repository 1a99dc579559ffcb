"""A resource a retriever opens on first use (an index file, an HTTP client) and shares between threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    def close(self) -> None: ...


R = TypeVar("R", bound=Closable)


class OpenedOnFirstUse(Generic[R]):
    """Opened by the first caller that needs it, not at construction: building a graph must not touch the
    disk or the network, and LangGraph may construct retrievers in processes that never query them.

    `close()` closes it; the next `get` opens it again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: R | None = None

    def get(self, open_it: Callable[[], R]) -> R:
        with self._lock:
            if self.current is None:
                self.current = open_it()
            return self.current

    def close(self) -> None:
        with self._lock:
            if self.current is not None:
                self.current.close()
                self.current = None
