"""The fixtures several e2e modules share, each started once per session or module: `langgraph dev`
costs seconds to start, Chromium about one.

- `served`: the graph without authentication (loopback only, everyone anonymous) on the examples and
  tests/e2e/corpus.py's HR folder; `langsmith_api` is where its LangSmith traffic would go.
- `model` and `served_llm`: a scripted OpenAI-compatible model on loopback, and a deployment that uses it.
- `playwright`, `browser`, `desktop` and `phone`: Debian's Chromium and a watched page at two sizes.
- `redis`: a Redis on loopback beside tests/conftest.py's `postgres`, for the Aegra
  deployments (tests/e2e/deployments.py, tests/e2e/test_replicas.py); started only when one is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from tests.e2e import dev_server
from tests.e2e.chromium import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE, Watched
from tests.e2e.corpus import server_env
from tests.e2e.dev_server import DevServer, free_port
from tests.support import redis_server
from tests.support.langsmith_server import LangSmithServer
from tests.support.openai_server import OpenAIServer
from tests.support.redis_server import RedisServer

# -- deployments -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def langsmith_api() -> Iterator[LangSmithServer]:
    """Where LangSmith traffic would go: the served server has a key but tracing is not on."""
    with LangSmithServer() as api:
        yield api


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory, examples: Path,
           langsmith_api: LangSmithServer) -> Iterator[DevServer]:
    yield from _deployment(tmp_path_factory.mktemp("served"), examples,
                           LANGSMITH_API_KEY="a-key-without-tracing", LANGSMITH_ENDPOINT=langsmith_api.url)


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def served_llm(tmp_path_factory: pytest.TempPathFactory, examples: Path, model: OpenAIServer) -> Iterator[DevServer]:
    """A deployment with a model: only the deployment may name one (a request may not)."""
    yield from _deployment(tmp_path_factory.mktemp("served-llm"), examples, EVIDENT_MODEL="test-model",
                           OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="test-key", EVIDENT_MODEL_TIMEOUT="20")


def _deployment(root: Path, examples: Path, **env: str) -> Iterator[DevServer]:
    """A real `langgraph dev` server over the examples, with the deployment's own environment `env`."""
    with dev_server.running(root / "server", env=server_env(root, examples, **env)) as server:
        yield server


# -- what a production server keeps its threads and runs in -------------------------------------------------


@pytest.fixture(scope="session")
def redis() -> Iterator[RedisServer]:
    if (problem := redis_server.available()) is not None:
        pytest.fail(problem)
    with RedisServer(free_port()) as server:
        yield server


# -- the browser -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/test-deps.sh` installs Debian's chromium")
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture
def desktop(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport=DESKTOP)
    yield Watched(context.new_page())
    context.close()


@pytest.fixture
def phone(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    yield Watched(context.new_page())
    context.close()
