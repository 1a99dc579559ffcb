"""Helpers of the nodes: who is asking on the server, how long a step took, what a query read of its
conversation, and the offline answer.

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

from evident.citations.answer import known_ids, parse_answer
from evident.context import EvidentContext
from evident.models import AlignmentDecision, Conversation, Line, Principal
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


def conversation_of(state: EvidentState) -> Conversation:
    """What the query's `rewrite` step read of its conversation (evident/nodes/rewrite.py)."""
    return Conversation.model_validate(state.get("conversation") or {})


def draft_of(state: EvidentState) -> list[Line]:
    """The draft answer's lines, as this step's own copy (`verify` and `postprocess` change them in place)."""
    return [line.model_copy(deep=True) for line in read(Line, state.get("draft"))]


def known_documents(state: EvidentState) -> frozenset[str]:
    """The ids a draft may cite: the verified passages' and the retrieved documents' (`parse_answer`)."""
    return known_ids(state.get("verified") or [], state.get("documents") or [])


def offline_draft(state: EvidentState, ctx: EvidentContext) -> list[Line]:
    """The offline composer's answer from the verified passages, as draft lines: what `generate` writes without
    a model (or when the model failed) and what `verify` falls back to when no sentence of the model's stands.
    One call for both, so either leaves out what the conversation already said and hedges on weak evidence."""
    text = compose_answer(state["query"], read(AlignmentDecision, state.get("verified")), settings=ctx.offline,
                          said=conversation_of(state).said, weak=state.get("weak_evidence", False))
    return parse_answer(text, known_documents(state))
