"""`evident model check` against the scripted server posing as different real servers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from evident.cli import app
from tests.support.llm import echo_responder
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

COUNTING = " ".join(str(i) for i in range(1, 301))


def responder(request: ChatRequest) -> Reply:
    if "Count from 1 to 300" in request.text:
        return Reply(content=COUNTING)
    return echo_responder()(request)


def check(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer | None, *args: str) -> Any:
    monkeypatch.delenv("EVIDENT_CONFIG", raising=False)
    monkeypatch.chdir("/")  # no ./evident.toml
    if server is not None:
        monkeypatch.setenv("EVIDENT_MODEL", "test-model")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    return CliRunner().invoke(app, ["model", "check", *args])


def test_a_llama_cpp_like_server_is_probed_and_settings_recommended(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(responder, reject_json_schema=True, slots=1, cap_field="max_tokens", n_ctx=4096) as server:
        result = check(monkeypatch, server, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["reachable"] and report["model_ids"] == ["test-model"]
    assert report["context_window"] == 4096 and report["context_window_from"] == "/props n_ctx"
    assert report["slots"] == 1
    assert report["structured_output"] == "json_mode"  # json_schema got HTTP 500
    assert report["cap_honoured"] is True
    assert report["extraction"]["ok"] and report["generation"]["ok"]
    assert report["recommended"]["concurrency"] == 1
    assert report["recommended"]["structured_output"] == "json_mode"
    assert report["recommended"]["context_window"] == 4096
    assert report["recommended"]["timeout_s"] >= 60


def test_a_server_that_ignores_the_cap_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(responder, cap_field="max_completion_tokens_ignored", n_ctx=32768) as server:
        result = check(monkeypatch, server)
    assert result.exit_code == 0, result.output
    assert "output cap honoured: no" in result.output
    assert "structured output: json_schema" in result.output
    assert "32768 (/v1/models meta.n_ctx_train" in result.output
    assert "[model]" in result.output and "concurrency = 1" in result.output
    assert "context_window =" not in result.output  # a training context is no server setting


def test_no_model_or_an_unreachable_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVIDENT_MODEL", raising=False)
    result = check(monkeypatch, None)
    assert result.exit_code == 2 and "no model is configured" in result.output
    monkeypatch.setenv("EVIDENT_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on port 9
    result = check(monkeypatch, None)
    assert result.exit_code == 2 and "cannot reach the model server at http://127.0.0.1:9/v1" in result.output
    assert "Traceback" not in result.output
