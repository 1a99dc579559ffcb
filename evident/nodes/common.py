"""Helpers of the nodes: who is asking on the server, how long a step took, and the offline answer.

A node reads its settings with `evident.request_settings.run_settings(runtime)`; on the server, that keeps a
request to the settings it may set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from evident.context import EvidentContext
from evident.conversation.messages import earlier_answers
from evident.models import AlignmentDecision, Principal
from evident.offline.composer import compose_answer
from evident.state import EvidentState, Timed, read


def _field(user: Any, key: str) -> Any:
    if isinstance(user, Mapping) or hasattr(user, "get"):
        try:
            return user.get(key)
        except Exception:  # a user object whose dict view fails: use its attribute
            pass
    return getattr(user, key, None)


def authenticated_principal(runtime: Runtime[EvidentContext], config: RunnableConfig | None) -> Principal:
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
def timed(name: str, update: Timed) -> Iterator[None]:
    """Record the step's time in its `update`, however the step leaves the block (early returns too)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings = update.get("timings_ms")
        took = round((time.perf_counter() - start) * 1000, 2)
        update["timings_ms"] = {**(timings if isinstance(timings, dict) else {}), name: took}


def offline_draft(state: EvidentState, ctx: EvidentContext) -> str:
    """The offline composer's answer from the verified passages: what `generate` writes without a model (or
    when the model failed) and what `verify` falls back to when no sentence of the model's stands. One call
    for both, so either leaves out what the conversation already said and hedges on weak evidence."""
    return compose_answer(state["query"], read(AlignmentDecision, state.get("verified")), settings=ctx.offline,
                          said=earlier_answers(state.get("messages")), weak=state.get("weak_evidence", False))
