"""Feedback on an answer: `POST /threads/{thread_id}/runs/{run_id}/feedback` with `{"score": 1 | 0,
"comment"?: "…"}` (thumbs up or down, an optional comment of at most `MAX_COMMENT_CHARS`).

Who may give it is decided exactly as for the run itself: the handler asks the served LangGraph API,
in process and with the caller's own `Authorization` header, for the thread and then for the run, so
LangGraph's auth handler (evident/web/auth.py) authenticates the caller and filters by owner. A
thread or run that is not the caller's is a 404, the same answer as one that does not exist. The
caller's identity comes from that authentication only; nothing in the body names a user or a run.

Where it goes, the ecosystem's convention: with LangSmith tracing configured (`LANGSMITH_TRACING`
and a key), the run is traced under its own run id, so the feedback is sent to LangSmith's feedback
API on that run (`Client.create_feedback(run_id, key="user_score", …)`), next to its trace. Without
LangSmith it is kept on the thread, in its metadata under `feedback:<run_id>`, written through the
same API with the caller's token (so the metadata bound and the owner stamp of auth.py apply).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

import httpx
from langsmith import Client, utils
from starlette.requests import Request
from starlette.responses import JSONResponse

from evident.web.inprocess import as_caller

log = logging.getLogger(__name__)

MAX_COMMENT_CHARS = 1000
FEEDBACK_KEY = "user_score"
_ID = re.compile(r"^[0-9A-Za-z-]{1,64}$")


def refused(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def parse_feedback(body: Any) -> tuple[int, str] | str:
    """(score, comment) of a request body, or why it is not accepted."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    unknown = sorted(set(body) - {"score", "comment"})
    if unknown:
        return f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: only score and comment"
    score = body.get("score")
    if isinstance(score, bool) or score not in (0, 1):
        return "score must be 1 (helpful) or 0 (not helpful)"
    comment = body.get("comment", "")
    if comment is None:
        comment = ""
    if not isinstance(comment, str):
        return "comment must be a string"
    comment = comment.strip()
    if len(comment) > MAX_COMMENT_CHARS:
        return f"the comment is too long: {len(comment)} characters (the limit is {MAX_COMMENT_CHARS})"
    return int(score), comment


def langsmith_configured() -> bool:
    """Tracing to LangSmith is on for this process (so served runs have traces to attach feedback to)."""
    return bool(utils.tracing_is_enabled()) and bool(utils.get_api_key(None))


def _send_to_langsmith(run_id: str, score: int, comment: str) -> str:
    feedback = Client().create_feedback(run_id, key=FEEDBACK_KEY, score=score, comment=comment or None,
                                        source_info={"from": "evident page"})
    return str(feedback.id)


async def give_feedback(request: Request) -> JSONResponse:
    thread_id, run_id = request.path_params["thread_id"], request.path_params["run_id"]
    if not _ID.match(thread_id) or not _ID.match(run_id):
        return refused(404, "no such run")
    try:
        parsed = parse_feedback(json.loads(await request.body() or b"null"))
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's stack (the gate bounds it first)
        parsed = "the body must be JSON"
    if isinstance(parsed, str):
        return refused(422, parsed)
    score, comment = parsed
    async with as_caller(request.scope) as api:
        # The caller's own thread and run, or nothing: auth.py's owner filter answers 404 otherwise.
        for path in (f"/threads/{thread_id}", f"/threads/{thread_id}/runs/{run_id}"):
            found = await api.get(path)
            if found.status_code != 200:
                status = found.status_code if found.status_code in (401, 403, 503) else 404
                return refused(status, response_detail(found) if status != 404 else "no such run on your threads")
        run = found.json()
        if str(run.get("thread_id")) != thread_id:
            return refused(404, "no such run on your threads")
        if langsmith_configured():
            try:
                feedback_id = await asyncio.to_thread(_send_to_langsmith, run_id, score, comment)
            except Exception as exc:  # LangSmith down or refusing: the caller is told, the log says why
                log.warning("evident: feedback on run %s not sent to LangSmith: %s", run_id, exc)
                return refused(502, "LangSmith did not take the feedback; try again later")
            return JSONResponse({"stored": "langsmith", "run_id": run_id, "feedback_id": feedback_id})
        entry = {"score": score, "comment": comment, "at": datetime.now(UTC).isoformat(timespec="seconds")}
        patched = await api.patch(f"/threads/{thread_id}", json={"metadata": {f"feedback:{run_id}": entry}})
        if patched.status_code != 200:
            return refused(patched.status_code, response_detail(patched))
    return JSONResponse({"stored": "thread", "run_id": run_id})


def response_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else f"HTTP {response.status_code}"
