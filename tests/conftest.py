from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.postgres import PostgresServer

# `make test` is CI's gate: it must not turn red on an example that no earlier run drew. The property
# tests draw the same examples on every run (derandomize); `EVIDENT_HYPOTHESIS=explore` draws new ones
# each run, to hunt for bugs (README, Development). A failure found that way becomes an @example.
# No deadline in either: a shared 2-core CI runner is slow at times, and a timing failure is no bug.
settings.register_profile("repeatable", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
_PROFILE = os.environ.get("EVIDENT_HYPOTHESIS", "repeatable")
if _PROFILE not in ("repeatable", "explore"):
    raise pytest.UsageError(f"EVIDENT_HYPOTHESIS={_PROFILE!r}: use 'repeatable' (the default) or 'explore'")
settings.load_profile(_PROFILE)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "corpus"

# Settings read from the environment (the CLI, servers and processes a session fixture starts) rank
# by words alone, so that those tests pin what the words rank and answer; a test marked `embeddings`
# gets the environment of an install with the local model (the e2e servers, whose environment is
# scrubbed, get `none` from tests/e2e/corpus.py). A test that builds its own
# `EvidentContext` gets the library's default: the local model, installed by `make test`.
# Set at import, before any session fixture starts a process that would inherit the machine's setting.
for _name in [n for n in os.environ if n.startswith("EVIDENT_EMBEDDINGS") or n == "EVIDENT_SEMANTIC_WEIGHT"]:
    del os.environ[_name]
os.environ["EVIDENT_EMBEDDINGS"] = "none"


@pytest.fixture(autouse=True)
def _isolated_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexes go to a per-session temp dir; no model, config or tracing leaks in from the machine."""
    monkeypatch.setenv("EVIDENT_INDEX_DIR", str(tmp_path_factory.getbasetemp() / "indexes"))
    if request.node.get_closest_marker("embeddings") is not None:
        monkeypatch.delenv("EVIDENT_EMBEDDINGS", raising=False)
    for var in ("EVIDENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "EVIDENT_CONFIG", "EVIDENT_CORPUS",
                "EVIDENT_MODE", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL 15 on loopback for the whole session (tests/support/postgres.py), started on first use."""
    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()
