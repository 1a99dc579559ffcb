"""Helpers every node uses: the run's settings and timing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evident.context import EvidentContext


def settings(runtime: Any) -> EvidentContext:
    """The run's `EvidentContext`; environment/`evident.toml` defaults when none was passed."""
    ctx = getattr(runtime, "context", None) if runtime is not None else None
    if isinstance(ctx, EvidentContext):
        return ctx
    if isinstance(ctx, dict):
        return EvidentContext.from_env(**ctx)
    return EvidentContext.from_env()


@contextmanager
def timed(name: str, update: dict[str, Any]) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        update.setdefault("timings_ms", {})[name] = round((time.perf_counter() - start) * 1000, 2)
