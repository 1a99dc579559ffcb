"""The served graph without authentication (loopback only, everyone anonymous), started once for
every e2e module that needs it: each start-up of `langgraph dev` costs seconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import dev_server
from tests.e2e.dev_server import DevServer
from tests.e2e.test_server import server_env
from tests.support.langsmith_server import LangSmithServer


@pytest.fixture(scope="session")
def langsmith_api() -> Iterator[LangSmithServer]:
    """Where LangSmith traffic would go: the served server has a key but tracing is not on."""
    with LangSmithServer() as api:
        yield api


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory, examples: Path,
           langsmith_api: LangSmithServer) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("served")
    env = server_env(root, examples, LANGSMITH_API_KEY="a-key-without-tracing", LANGSMITH_ENDPOINT=langsmith_api.url)
    with dev_server.running(root / "server", env=env) as server:
        yield server
