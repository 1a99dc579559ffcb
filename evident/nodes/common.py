"""Helpers every node uses: the run's settings, who is asking, and timing.

A run started by the LangGraph server (its runtime carries `server_info`) is a request, not the
owner: it may set only the `RequestSettings`, and its principal is the authenticated caller.
Whatever route the request came in by (a run, a thread's run, an assistant's context), the nodes
read their settings here, so a refused setting never reaches a retriever, a model or a file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from evident.context import (
    ContextWithDefaults,
    EvidentContext,
    RequestSettingsError,
    split_request_settings,
)
from evident.models import Principal


def served(runtime: Any) -> bool:
    """Whether the LangGraph server started this run (it sets the assistant and graph it runs)."""
    return getattr(runtime, "server_info", None) is not None


def _requested(ctx: Any) -> dict[str, Any] | None:
    """What a served run's request asked for; None for an `EvidentContext` built by the owner's code."""
    if isinstance(ctx, ContextWithDefaults):
        return ctx.requested
    if isinstance(ctx, Mapping):
        return dict(ctx)
    return None


def refused_settings(runtime: Any) -> list[RequestSettingsError]:
    """The settings a served run's request may not set (none for the owner's runs)."""
    if not served(runtime):
        return []
    return split_request_settings(_requested(getattr(runtime, "context", None)))[1]


def settings(runtime: Any) -> EvidentContext:
    """The run's `EvidentContext`; environment/`evident.toml` defaults when none was passed.

    For a served run, only the request's allowed settings apply over the deployment's: a refused
    one is left out here (and reported by `retrieve`, which ends the query)."""
    ctx = getattr(runtime, "context", None) if runtime is not None else None
    if served(runtime):
        requested = _requested(ctx)
        if requested is not None:
            allowed, refused = split_request_settings(requested)
            if refused or not isinstance(ctx, ContextWithDefaults):
                return ContextWithDefaults(**allowed)
    if isinstance(ctx, EvidentContext):
        return ctx
    if isinstance(ctx, dict):
        return EvidentContext.from_env(**ctx)
    return EvidentContext.from_env()


def _field(user: Any, key: str) -> Any:
    if isinstance(user, Mapping) or hasattr(user, "get"):
        try:
            return user.get(key)
        except Exception:  # a user object whose dict view fails: use its attribute
            pass
    return getattr(user, key, None)


def authenticated_principal(runtime: Any, config: Mapping[str, Any] | None) -> Principal:
    """A served run's principal: the user the server authenticated (`langgraph_auth_user` of the
    run's config; a JSON copy of it on a database-backed server), never the request body.
    Anonymous callers (no authentication configured) get the empty principal: public documents."""
    user = ((config or {}).get("configurable") or {}).get("langgraph_auth_user")
    if user is None:
        info = getattr(runtime, "server_info", None)
        user = getattr(info, "user", None)
    if user is None or _field(user, "is_authenticated") is False:
        return Principal()
    identity = _field(user, "identity")
    groups = _field(user, "groups")
    return Principal(
        user=str(identity or ""),
        groups=[str(g) for g in groups] if isinstance(groups, (list, tuple)) else [],
    )


@contextmanager
def timed(name: str, update: dict[str, Any]) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        update.setdefault("timings_ms", {})[name] = round((time.perf_counter() - start) * 1000, 2)
