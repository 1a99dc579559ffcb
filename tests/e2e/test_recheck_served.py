"""`POST /threads/{thread_id}/recheck` on a served EvidenT (`langgraph dev` and Aegra): a thread's answer is re-checked
after the cited page is edited and re-indexed, and after its reader loses the group that may see it; only the
thread's owner may ask, and who asks comes from the token alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.chromium import WAIT_MS, Watched, ask
from tests.e2e.corpus import server_env, tokens_file
from tests.e2e.deployments import SERVERS, deployment
from tests.e2e.dev_server import DevServer

ERIN, SAM = "erin-token-0f3a9c2e", "sam-token-7d41b0aa"
QUESTION = "What is the executive bonus pool for 2025?"


@pytest.fixture(params=SERVERS)
def served(request: pytest.FixtureRequest, tmp_path: Path,
           examples: Path) -> Iterator[tuple[DevServer, Path, dict[str, str]]]:
    tokens = tmp_path / "tokens.json"
    tokens_file(tokens, {ERIN: ("erin", ["executives"]), SAM: ("sam", [])})
    env = server_env(tmp_path, examples, EVIDENT_AUTH_TOKENS_FILE=str(tokens))
    with deployment(request, tmp_path / "server", env) as server:
        yield server, tmp_path, env


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _edit_and_reindex(root: Path, env: dict[str, str]) -> None:
    """The cited page edited, and the served index refreshed from the corpus as `evident index` does."""
    page = root / "hr" / "exec-comp.md"
    page.write_text(page.read_text(encoding="utf-8").replace("4.2 million", "4.5 million"), encoding="utf-8")
    indexed = subprocess.run([sys.executable, "-m", "evident.cli", "index", *env["EVIDENT_CORPUS"].split(os.pathsep),
                              "--json"], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                             env={**{k: v for k, v in os.environ.items() if not k.startswith("EVIDENT_")}, **env})
    assert indexed.returncode == 0, indexed.stderr


def test_a_threads_answer_goes_stale_as_its_page_changes_and_its_reader_loses_access(
        served: tuple[DevServer, Path, dict[str, str]]) -> None:
    server, root, env = served
    url = server.url
    thread = httpx.post(f"{url}/threads", json={}, headers=_as(ERIN), timeout=10).json()["thread_id"]
    run = {"assistant_id": "evident", "input": {"query": QUESTION}}
    out = httpx.post(f"{url}/threads/{thread}/runs/wait", json=run, headers=_as(ERIN), timeout=120).json()
    assert out["status"] == "answered" and any(c["url"] == "https://hr.example/exec-comp" for c in out["citations"])
    route = f"{url}/threads/{thread}/recheck"

    def recheck(token: str | None = ERIN) -> httpx.Response:
        return httpx.post(route, headers=_as(token) if token else {}, timeout=60)

    def outcomes() -> set[str]:
        response = recheck()
        assert response.status_code == 200, response.text
        [answer] = response.json()["answers"]
        return {c["outcome"] for c in answer["checks"] if c["url"] == "https://hr.example/exec-comp"}

    assert outcomes() == {"unchanged"}
    assert recheck(None).status_code == 401 and recheck("wrong").status_code == 401
    assert recheck(SAM).status_code == 404  # not sam's thread: as if it did not exist

    _edit_and_reindex(root, env)
    assert outcomes() == {"changed"}
    [answer] = recheck().json()["answers"]
    assert answer["stale"] and any("4.5 million" in c["nearest"] for c in answer["checks"])

    tokens_file(root / "tokens.json", {ERIN: ("erin", []), SAM: ("sam", [])})  # erin leaves the executives
    assert outcomes() == {"gone"}
    body: dict[str, Any] = recheck().json()
    assert "4.5 million" not in str(body) and "4.2 million" in str(body)  # the quote she was given, nothing new


def test_the_page_marks_a_citation_whose_quote_no_longer_stands(served: tuple[DevServer, Path, dict[str, str]],
                                                                desktop: Watched) -> None:
    server, root, env = served
    page = desktop.page
    page.goto(f"{server.url}/")
    page.fill("#token", ERIN)
    ask(page, QUESTION)
    actions = page.locator("#answer-actions")
    actions.get_by_role("button", name="Check sources again").click()
    expect(actions.locator(".action-status")).to_have_text("Every quote still stands in its source.", timeout=WAIT_MS)
    expect(page.locator("#answer button.chip.stale")).to_have_count(0)

    _edit_and_reindex(root, env)
    actions.get_by_role("button", name="Check sources again").click()
    expect(actions.locator(".action-status")).to_contain_text("no longer stand as cited: marked", timeout=WAIT_MS)
    stale = page.locator("#answer button.chip.stale")
    expect(stale.first).to_have_attribute("title", "Stale: the quote is no longer in its source")
    assert desktop.errors == [] and desktop.console == []
