"""What the `rewrite` step settles before any search, once for the whole query: who is asking, and whether the
query may run at all.

- The caller: on the server, the authenticated user, never the request body (a body principal is noted and
  dropped from the thread's state); elsewhere, the input's principal, validated. `retrieve` searches as
  `caller`.
- The query ends (`status: "error"`, a one-line `error`, straight to `postprocess`) on an invalid principal, a
  request setting the run may not take (`run_settings`, evident/context.py), a refused conversation (the
  `problem` of its `Rewrite`) or a question that is missing, empty, not text or too long, in that order.
"""

from __future__ import annotations

import logging
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from evident.connectors.acl import PrincipalError, coerce_principal
from evident.context import EvidentContext
from evident.conversation.rule import query_too_long
from evident.models import Principal
from evident.nodes.common import authenticated_principal
from evident.nodes.names import POSTPROCESS, RETRIEVE
from evident.request_settings import refused_settings, served
from evident.state import EvidentState, QueryStart

log = logging.getLogger(__name__)

IGNORED_PRINCIPAL = ("the request's principal was ignored: on the server, documents are filtered "
                     "for the authenticated caller")


def check_query(query: object, ctx: EvidentContext) -> str | None:
    """Why `query` cannot be asked (None when it can)."""
    if query is None:
        return ('the input has no query: give {"query": "your question"} '
                'or {"messages": [{"role": "user", "content": "your question"}]}')
    if not isinstance(query, str):
        return f"the query must be a string, not {type(query).__name__}"
    if not query.strip():
        return "the query is empty"
    if any("\ud800" <= char <= "\udfff" for char in query):
        return "the query is not valid UTF-8 text (it holds an unpaired surrogate)"
    return query_too_long(query, ctx.max_query_chars)


def _run_config() -> RunnableConfig | None:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run (a unit test of the node)
        return None


def _caller(state: EvidentState, runtime: Runtime[EvidentContext], update: QueryStart) -> Principal | None:
    """Who is asking: the authenticated caller on the server, else the principal of the input."""
    if not served(runtime):
        return coerce_principal(state.get("principal"))
    if state.get("principal"):
        update["notes"] = [IGNORED_PRINCIPAL]
        log.info("rewrite: %s", IGNORED_PRINCIPAL)
    update["principal"] = None  # a body principal must not stay in the thread's state either
    return authenticated_principal(runtime, _run_config())


def admit(state: EvidentState, runtime: Runtime[EvidentContext], ctx: EvidentContext, update: QueryStart) -> None:
    """The query's `caller`, or the reason it ends (`status: "error"`), written into `update`, which holds
    this step's `query` and `rewrite` already."""
    try:
        update["caller"] = _caller(state, runtime, update)
    except PrincipalError as exc:
        update.update({"status": "error", "error": str(exc)})
        return
    refused = refused_settings(runtime)
    if refused:
        also = f" (refused: {', '.join(e.setting for e in refused)})" if len(refused) > 1 else ""
        update.update({"status": "error", "error": f"{refused[0]}{also}"})
        return
    rewrite = update.get("rewrite")
    problem = (rewrite.problem if rewrite is not None else "") or check_query(
        update["query"] if "query" in update else state.get("query"), ctx)
    if problem:
        update.update({"status": "error", "error": problem})


def route_after_rewrite(state: EvidentState) -> Literal["retrieve", "postprocess"]:
    """Bad input ends the query before any search: nothing to retrieve, extract or answer."""
    return POSTPROCESS if state.get("status") == "error" else RETRIEVE
