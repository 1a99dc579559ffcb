"""One loader: the CLI (`EvidentContext.from_env`), the server and its page (the graph's context schema,
`ContextWithDefaults`, which the LangGraph server builds every run's context with) read the same settings
from the same defaults < evident.toml < environment < caller."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evident.context import EvidentContext
from evident.graph import graph
from evident.request_settings import ContextWithDefaults
from evident.settings import ConfigError, DeployedServerSettings

TOML = """
[retrieval]
top_n = 7
k = 9

[alignment]
threshold = 0.6

[offline]
window_units = 2
"""


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # A path of its own: the server's reading of the file is cached per EVIDENT_CONFIG.
    config = tmp_path / "evident.toml"
    config.write_text(TOML, encoding="utf-8")
    monkeypatch.setenv("EVIDENT_CONFIG", str(config))
    monkeypatch.setenv("EVIDENT_K", "11")  # the environment over the file
    return config


def test_the_cli_and_the_server_read_the_same_settings(deployment: Path) -> None:
    cli = EvidentContext.from_env(top_n=5)
    served = ContextWithDefaults(top_n=5)
    assert cli.model_dump() == EvidentContext.model_validate(served.model_dump()).model_dump()
    # defaults < file < environment < caller
    assert (cli.top_n, cli.k, cli.threshold, cli.offline.window_units) == (5, 11, 0.6, 2)
    assert cli.ngram_n == EvidentContext().ngram_n


def test_the_graph_builds_a_runs_context_with_the_deployments_settings(deployment: Path) -> None:
    # What LangGraph does with a request's `context` dict: `context_schema(**context)`.
    schema = graph.builder.context_schema
    assert schema is ContextWithDefaults
    run = schema(top_n=3)
    assert (run.top_n, run.k, run.threshold, run.offline.window_units) == (3, 11, 0.6, 2)
    assert run.requested == {"top_n": 3}


# Today's variables, each with a value and the setting it lands in (what the README and docs/llm.md list).
VARIABLES = [
    ("EVIDENT_MODEL", "m", "model", None), ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1", "base_url", None),
    ("EVIDENT_MODE", "offline", "mode", None), ("EVIDENT_NGRAM_N", "4", "ngram_n", 4),
    ("EVIDENT_THRESHOLD", "0.5", "threshold", 0.5), ("EVIDENT_TOP_N", "3", "top_n", 3),
    ("EVIDENT_K", "4", "k", 4), ("EVIDENT_INDEX", "/tmp/x.sqlite", "index_path", None),
    ("EVIDENT_MODEL_TIMEOUT", "5", "model_timeout_s", 5.0), ("EVIDENT_MODEL_RETRIES", "1", "model_max_retries", 1),
    ("EVIDENT_CONTEXT_BUDGET", "2000", "context_budget_tokens", 2000),
    ("EVIDENT_STRUCTURED_OUTPUT", "text", "structured_output", None),
    ("EVIDENT_TOKEN_COUNTER", "approx", "token_counter", None),
    ("EVIDENT_MODEL_MAX_TOKENS", "64", "model_max_tokens", 64),
    ("EVIDENT_CONTEXT_WINDOW", "4096", "context_window", 4096),
    ("EVIDENT_MODEL_CONCURRENCY", "3", "model_concurrency", 3), ("EVIDENT_EMBEDDINGS", "none", "embeddings", None),
    ("EVIDENT_EMBEDDINGS_TIMEOUT", "2.5", "embeddings_timeout_s", 2.5),
    ("EVIDENT_SEMANTIC_WEIGHT", "0.2", "semantic_weight", 0.2),
    ("EVIDENT_EMBEDDINGS_BACKGROUND", "false", "embeddings_background", False),
    ("EVIDENT_CORPUS", os.pathsep.join(["/a", "/b"]), "corpus", ["/a", "/b"]),
]


@pytest.mark.parametrize("variable, value, setting, expected", VARIABLES)
def test_every_environment_variable_keeps_its_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str,
                                                   value: str, setting: str, expected: object) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVIDENT_CONFIG", raising=False)
    monkeypatch.setenv(variable, value)
    ctx = EvidentContext.from_env()
    assert getattr(ctx, setting) == (value if expected is None else expected)
    monkeypatch.setenv(variable, "")  # an empty variable is not set
    assert getattr(EvidentContext.from_env(), setting) == EvidentContext().model_dump()[setting]


def test_variables_outside_the_evident_names_are_not_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # evident.toml's keys are not variables: a container's DATABASE or BASE_URL belongs to something else.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVIDENT_CONFIG", raising=False)
    for name, value in [("DATABASE", "mysql://db/app"), ("REDIS", "cache:6379"), ("TOKENS_FILE", "/etc/passwd"),
                        ("BASE_URL", "http://elsewhere.example"), ("INDEX_PATH", "/x"), ("MODEL_TIMEOUT_S", "1")]:
        monkeypatch.setenv(name, value)
    server = DeployedServerSettings.load()
    assert (server.database, server.redis, server.tokens_file) == (None, None, None)
    ctx = EvidentContext.from_env()
    assert (ctx.base_url, ctx.index_path, ctx.model_timeout_s) == (None, None, EvidentContext().model_timeout_s)


def test_a_bad_environment_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVIDENT_CONFIG", raising=False)
    monkeypatch.setenv("EVIDENT_MODEL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"^\$EVIDENT_MODEL_TIMEOUT: invalid setting model_timeout_s: "):
        EvidentContext.from_env()


def test_a_request_is_checked_once_when_the_context_is_built(deployment: Path) -> None:
    run = ContextWithDefaults(top_n=2, model="attacker")
    assert [e.setting for e in run.refused] == ["model"] and run.model == "attacker"  # the owner's view
    served = run.as_request()
    assert (served.top_n, served.model, served.k) == (2, None, 11) and served.as_request() is served
    assert run.as_request() is served  # built once per run


def test_the_environment_sets_one_key_of_a_section(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text('[offline]\nwindow_units = 2\nmax_sentences = 4\n[output]\nglossary = { "tf" = "T F" }\n',
                      encoding="utf-8")
    monkeypatch.setenv("EVIDENT_OFFLINE__WINDOW_UNITS", "1")
    ctx = EvidentContext.from_env(config, glossary={"ab": "A B"})
    assert (ctx.offline.window_units, ctx.offline.max_sentences) == (1, 4)
    assert ctx.glossary == {"ab": "A B"}  # what the caller gives replaces the deployment's


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text("top_n = 3\n", encoding="utf-8")
    assert EvidentContext.from_env(config).top_n == 3
    config.write_text("top_n = 40\n", encoding="utf-8")
    assert EvidentContext.from_env(config).top_n == 40
