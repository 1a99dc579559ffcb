"""Stored answers re-checked: `POST /threads/{thread_id}/recheck` says, for each answer the caller's thread
holds, whether its citations' quotes still stand in their sources as the caller may see them now.

The thread is read through the served LangGraph API, in process, with the caller's own `Authorization`
header (as for feedback, evident/web/feedback.py): a thread that is not the caller's is a 404, the same as
one that does not exist. Who is asking comes from that same authentication (`auth.identify`), never from
the body, which is not read. Each of the thread's most recent MAX_ANSWERS answers (the AI messages that
carry their `citations`) is checked with `evident.agent.recheck.recheck_answer` against the deployment's
sources; a re-checked quote whose source text has not changed since is answered from a cache keyed by
content hash (evident/agent/recheck.py), so opening a thread again costs one read per cited document.

The response: `{"thread_id", "answers": [{"message_id", "query", "checks": [...], "counts": {...}, "stale"}]}`
(docs/revisions.md says what each check holds).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any, cast

from langgraph_sdk import Auth
from starlette.requests import Request
from starlette.responses import JSONResponse

from evident.agent.recheck import recheck_answer
from evident.context import EvidentContext
from evident.nodes.common import authenticated_principal
from evident.web.auth import direct_client, identify
from evident.web.feedback import refused, response_detail
from evident.web.inprocess import as_caller
from evident.web.settings import server_settings

MAX_ANSWERS = 20  # the most recent answers of a thread one request re-checks: bounded work per request
_ID = re.compile(r"^[0-9A-Za-z-]{1,64}$")


def cited_answers(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The thread's answers that carry citations (its AI messages, as JSON), oldest first, at most MAX_ANSWERS."""
    messages = values.get("messages")
    found = []
    for message in messages if isinstance(messages, list) else []:
        extra = message.get("additional_kwargs") if isinstance(message, Mapping) else None
        if isinstance(extra, Mapping) and message.get("type") == "ai" and isinstance(extra.get("citations"), list):
            found.append({"message_id": message.get("id"), "query": extra.get("standalone_query") or "",
                          "citations": extra["citations"]})
    return found[-MAX_ANSWERS:]


def _recheck(answers: list[dict[str, Any]], user: dict[str, Any]) -> list[dict[str, Any]]:
    principal = authenticated_principal(cast(Any, None), {"configurable": {"langgraph_auth_user": user}})
    context = EvidentContext.from_env()
    out = []
    for answer in answers:
        result = recheck_answer(answer, context=context, principal=principal)
        out.append({"message_id": answer["message_id"], **result.model_dump(mode="json"), "stale": not result.stands})
    return out


async def recheck_thread(request: Request) -> JSONResponse:
    thread_id = request.path_params["thread_id"]
    if not _ID.match(thread_id):
        return refused(404, "no such thread")
    async with as_caller(request.scope) as api:
        # The caller's own thread, or nothing: auth.py's owner filter answers 404 otherwise.
        found = await api.get(f"/threads/{thread_id}/state")
        if found.status_code != 200:
            status = found.status_code if found.status_code in (401, 403, 503) else 404
            return refused(status, response_detail(found) if status != 404 else "no such thread of yours")
    state = found.json()
    values = state.get("values") if isinstance(state, Mapping) else None
    answers = cited_answers(values if isinstance(values, Mapping) else {})
    client = direct_client(request.scope.get("client"), request.headers)
    try:
        # Reading the tokens file blocks: not on the event loop.
        user = await asyncio.to_thread(identify, request.headers.get("authorization"), client, server_settings())
    except Auth.exceptions.HTTPException as exc:
        return refused(exc.status_code, str(exc.detail))
    checked = await asyncio.to_thread(_recheck, answers, user)
    return JSONResponse({"thread_id": thread_id, "answers": checked})
