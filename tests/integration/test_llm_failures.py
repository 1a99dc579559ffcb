"""Model failures degrade one step to the offline engine and say so; they never crash a query.

Also: configuration from the environment and evident.toml, and lazy model creation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evident.context import EvidentContext
from evident.graph import build_graph
from evident.models import INSUFFICIENT_ANSWER
from tests.support.llm import (
    BOOKING,
    BOOKING_QUERY,
    EXPENSES,
    TRAVEL,
    check_grounded,
    echo_responder,
    fake_context,
    llm_context,
    passages_json,
    passages_reply,
    retriever,
    scripted,
    server,
)
from tests.support.openai_server import OpenAIServer, Reply

__all__ = ["server"]

QUERY = BOOKING_QUERY


def run(server: OpenAIServer | None, **ctx: Any) -> dict[str, Any]:
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES))
    context = llm_context(server, **ctx) if server is not None else EvidentContext(**ctx)
    return g.invoke({"query": QUERY}, context=context)


def offline() -> dict[str, Any]:
    return build_graph(retriever=retriever(TRAVEL, EXPENSES)).invoke({"query": QUERY}, context=EvidentContext())


def test_429_then_success_is_retried(server: OpenAIServer) -> None:
    server.script(
        extract=[Reply(status=429, error="slow down", headers={"retry-after": "0"}), passages_reply((TRAVEL, BOOKING))],
        generate=[Reply(status=503, error="busy"), Reply(content=f"{BOOKING} [{TRAVEL}]")],
    )
    out = run(server)
    assert len(server.of_kind("extract")) == 2 and len(server.of_kind("generate")) == 2
    assert out["status"] == "answered" and out["model_errors"] == []
    assert out["answer"] == f"{BOOKING} [{TRAVEL}]"
    check_grounded(out)


def test_a_429_is_retried_after_its_retry_after(server: OpenAIServer) -> None:
    # Through the real ChatOpenAI (max_retries=0, so the wait is ours): the server's Retry-After (0.3 s),
    # not the backoff (5 s) that a retry without one waits.
    server.script(extract=[Reply(status=429, error="slow down", headers={"retry-after": "0.3"}),
                           passages_reply((TRAVEL, BOOKING))],
                  generate=[Reply(content=f"{BOOKING} [{TRAVEL}]")])
    out = run(server, model_backoff_s=5.0, model_backoff_max_s=10.0)
    first, retry = server.of_kind("extract")
    assert out["status"] == "answered" and out["model_errors"] == []
    assert 0.3 <= retry.started - first.started < 3


def test_429_after_all_retries_degrades_to_the_offline_engine(server: OpenAIServer) -> None:
    server.script(extract=[Reply(status=429, error="quota exceeded")],
                  generate=[Reply(status=429, error="quota exceeded")])
    out = run(server, model_max_retries=2)
    assert len(server.of_kind("extract")) == 3  # one call and two retries
    assert out["status"] == "degraded"
    steps = [e["message"].split(":")[0] for e in out["model_errors"]]
    assert steps == ["extract", "generate"]
    assert all("429" in e["message"] and e["kind"] == "model" for e in out["model_errors"])
    assert "offline" in out["model_errors"][0]["message"]
    reference = offline()
    assert out["answer"] == reference["answer"] and out["answer"] != INSUFFICIENT_ANSWER
    check_grounded(out)


def test_a_stalled_model_times_out_and_the_query_is_answered_offline(server: OpenAIServer) -> None:
    # The server would stall for 30 s; the client gives up after 0.3 s and the server wakes on stop.
    server.script(extract=[Reply(delay_s=30, content="{}")], generate=[Reply(delay_s=30, content="late")])
    out = run(server, model_timeout_s=0.3, model_max_retries=3)
    assert out["status"] == "degraded"
    assert [e["kind"] for e in out["model_errors"]] == ["timeout", "timeout"]
    assert "0.3 s" in out["model_errors"][0]["message"]
    assert len(server.of_kind("extract")) == 1  # timeouts are not retried
    assert out["answer"] == offline()["answer"]
    check_grounded(out)


def test_a_refusal_degrades(server: OpenAIServer) -> None:
    server.script(extract=[Reply(refusal="I can't help with that.")],
                  generate=[Reply(refusal="I can't help with that.")])
    out = run(server)
    assert out["status"] == "degraded"
    assert len(out["model_errors"]) == 2 and all("refused" in e["message"] for e in out["model_errors"])
    assert len(server.of_kind("extract")) == 1
    check_grounded(out)


def test_empty_output_degrades() -> None:
    model = scripted("", "")
    out = build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model).invoke(
        {"query": QUERY}, context=fake_context())
    assert out["status"] == "degraded"
    assert "no usable passage list" in out["model_errors"][0]["message"]
    assert "empty answer" in out["model_errors"][1]["message"]
    check_grounded(out)


def test_an_uncited_answer_that_nothing_supports_degrades() -> None:
    model = scripted(passages_json((TRAVEL, BOOKING)), "I'm sorry, but I cannot answer questions about travel.")
    out = build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model).invoke(
        {"query": QUERY}, context=fake_context())
    assert out["status"] == "degraded" and out["generated_by"] == "offline"
    assert [e["message"].split(":")[0] for e in out["model_errors"]] == ["verify"]
    assert "no sentence of the model's answer is supported" in out["model_errors"][0]["message"]
    assert "14 days" in out["answer"] and "sorry" not in out["answer"]
    check_grounded(out)


def test_server_errors_in_one_batch_degrade_only_that_batch(server: OpenAIServer) -> None:
    def respond(request: Any) -> Reply:
        if request.kind == "extract" and f"url: {TRAVEL}" in request.text:
            return Reply(status=500, error="boom")
        return echo_responder()(request)

    server.respond_with(respond)
    out = run(server, context_budget_tokens=256, token_counter="approx", chars_per_token=1.5, model_max_retries=0)
    assert out["status"] == "degraded"
    assert len(out["model_errors"]) == 1
    assert out["model_errors"][0]["message"].startswith("extract (batch 1 of 2): HTTP 500")
    # The expenses batch was read by the model, the travel batch by the offline extractor.
    assert {p["url"] for p in out["passages"]} == {TRAVEL, EXPENSES}
    assert "14 days" in out["answer"]
    check_grounded(out)


def test_no_api_key_for_a_hosted_model_is_a_config_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = run(None, model="gpt-4o-mini")
    assert out["status"] == "degraded"
    assert out["model_errors"][0]["kind"] == "config"
    assert "OPENAI_API_KEY" in out["model_errors"][0]["message"]
    assert len(out["model_errors"]) == 2  # extract and generate each say so once
    assert out["answer"] == offline()["answer"]


def test_mode_offline_wins_over_a_configured_model(server: OpenAIServer) -> None:
    out = run(server, mode="offline")
    assert server.requests == []
    assert out["model_errors"] == [] and out["answer"] == offline()["answer"]


def test_settings_from_environment_and_toml(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server.respond_with(echo_responder())
    monkeypatch.setenv("EVIDENT_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("EVIDENT_MODEL_TIMEOUT", "7")
    ctx = EvidentContext.from_env()
    assert ctx.model == "env-model" and ctx.model_timeout_s == 7 and ctx.resolved_mode == "llm"
    out = build_graph(retriever=retriever(TRAVEL)).invoke({"query": QUERY}, context=ctx)
    assert out["status"] == "answered", out["model_errors"]
    first = server.requests[0]
    assert first.body["model"] == "env-model" and first.headers["authorization"] == "Bearer sk-from-env"

    config = tmp_path / "evident.toml"
    config.write_text(f'[model]\nname = "toml-model"\nbase_url = "{server.base_url}"\ntimeout_s = 5\nmax_retries = 1\n'
                      '[alignment]\nsentence_threshold = 0.9\n')
    for var in ("EVIDENT_MODEL", "OPENAI_BASE_URL", "EVIDENT_MODEL_TIMEOUT"):
        monkeypatch.delenv(var)
    ctx = EvidentContext.from_env(config)
    assert (ctx.model, ctx.model_timeout_s, ctx.model_max_retries, ctx.sentence_threshold) == ("toml-model", 5, 1, 0.9)
    out = build_graph(retriever=retriever(TRAVEL)).invoke({"query": QUERY}, context=ctx)
    assert out["status"] == "answered"
    assert server.requests[-1].body["model"] == "toml-model"


def test_models_are_created_lazily_never_at_import() -> None:
    code = (
        "import sys\n"
        "import evident, evident.graph, evident.llm.models, evident.nodes.extract, evident.nodes.generate\n"
        "print('langchain_openai' in sys.modules, 'openai' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY"}}
    env["EVIDENT_MODEL"] = "gpt-4o-mini"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_cli_ask_json_uses_the_model(server: OpenAIServer, examples: Path, tmp_path: Path) -> None:
    server.respond_with(echo_responder())
    env = {**os.environ, "EVIDENT_MODEL": "cli-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k",
           "EVIDENT_INDEX_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "evident.cli", "ask",
         "How many days do I have to submit an expense report after a trip?", "--corpus", str(examples), "--json"],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model_errors"] == [] and out["status"] == "answered", out
    assert server.of_kind("extract") and server.of_kind("generate")
    retrieved = {r["url"] for r in out["retrieved"]}
    assert out["citations"] and all(c["url"] in retrieved and c["spans"] for c in out["citations"])
