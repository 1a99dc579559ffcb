"""The e2e deployments on either server that serves EvidenT: `langgraph dev` (in memory) and Aegra (one
replica on the session's PostgreSQL, a database of its own). A fixture parametrised with `SERVERS`
passes its `request` to `deployment`; tests that need a server's own behaviour read `server.server`.

Their error bodies differ in shape (`{"detail"}` from LangGraph's server, `{"error", "message"}` from
Aegra), never in status or message: `detail` reads either.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import dev_server
from tests.e2e.dev_server import DevServer

SERVERS = ("langgraph-dev", "aegra")
_databases = itertools.count(1)


@contextmanager
def deployment(request: pytest.FixtureRequest, folder: Path, env: Mapping[str, str]) -> Iterator[DevServer]:
    """The deployment of `request.param` (one of SERVERS) with the environment `env`."""
    if request.param == "aegra":
        postgres = request.getfixturevalue("postgres")
        database = postgres.create_database(f"{folder.parent.name}_{next(_databases)}".replace("-", "_"))
        with dev_server.running_aegra(folder, database=database, env=env) as server:
            yield server
    else:
        with dev_server.running(folder, env=env) as server:
            yield server


def detail(response: httpx.Response) -> str:
    """The message of an error response, from either server."""
    body: Any = response.json()
    return str(body.get("detail") or body.get("message") or "") if isinstance(body, dict) else ""
