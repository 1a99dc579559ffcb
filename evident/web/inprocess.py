"""The served app asked in process, as the caller of the request being handled.

Feedback (evident/web/feedback.py) and the request gate (evident/web/gate.py) read a thread, a run or an
assistant before they act on one. They ask the served LangGraph API itself, with the caller's own
`Authorization` header and client address, so the API's auth handler (evident/web/auth.py) authenticates
the caller and filters by owner exactly as for any request: another user's thread is a 404 here too.
"""

from __future__ import annotations

from typing import Any

import httpx
from starlette.types import Scope


def as_caller(scope: Scope) -> httpx.AsyncClient:
    """A client of the app that serves `scope`, sending the caller's token from the caller's address."""
    client = scope.get("client") or ("127.0.0.1", 0)
    # A route's own failure is its 500 response, as for any client, not an exception in the caller's request.
    transport = httpx.ASGITransport(app=scope["app"], client=(str(client[0]), int(client[1])),
                                    raise_app_exceptions=False)
    headers = {"Content-Type": "application/json"}
    for key, value in scope.get("headers") or ():
        if key.lower() == b"authorization":
            headers["Authorization"] = value.decode("latin-1")
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers, timeout=30)


async def read_as_caller(scope: Scope, path: str) -> Any:
    """The JSON of `GET path` as the caller, or None when it is not theirs (or not there)."""
    async with as_caller(scope) as api:
        found = await api.get(path)
    return found.json() if found.status_code == 200 else None
