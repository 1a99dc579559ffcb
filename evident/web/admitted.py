"""The client address of the request being handled, as `RequestGate` (evident/web/gate.py) admitted it.

Aegra calls the authenticate handler with the request's headers alone, so the handler reads the
address here. It lives in a module of its own because the servers load `evident/web/auth.py` by file
path, as a second copy of that module: a variable defined there would not be the gate's.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

# Unset (None) is no address, hence not loopback: a request that did not pass the gate is not trusted.
admitted_client: ContextVar[Any] = ContextVar("evident_admitted_client", default=None)
