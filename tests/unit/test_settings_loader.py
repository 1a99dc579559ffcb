"""One loader: the CLI (`EvidentContext.from_env`), the server and its page (the graph's context schema,
`ContextWithDefaults`, which the LangGraph server builds every run's context with) read the same settings
from the same defaults < evident.toml < environment < caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from evident.context import EvidentContext
from evident.graph import graph
from evident.request_settings import ContextWithDefaults

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
