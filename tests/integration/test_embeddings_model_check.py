"""`evident model check` reports the embeddings: on with the real local model, or why words only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.embeddings.model_files import locate_model_files
from tests.support.openai_server import OpenAIServer

# The real resolution of the settings (conftest.py sets words only for unmarked tests).
pytestmark = pytest.mark.embeddings


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("EVIDENT_CONFIG", "EVIDENT_EMBEDDINGS", "EVIDENT_EMBEDDINGS_MODEL_FILE", "EVIDENT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir("/")


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["model", "check", "--embeddings", *args])
    return result.exit_code, result.output


def test_the_local_model_is_reported_with_a_sample_similarity() -> None:
    code, out = check("--json")
    report = json.loads(out)["embeddings"]
    assert code == 0 and report["state"] == "on" and report["provider"] == "local"
    assert report["dimension"] == 384 and report["similarity_answer"] > report["similarity_unrelated"] + 0.3
    code, out = check()
    assert code == 0 and "embeddings dimension: 384" in out


def test_words_only_by_choice_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENT_EMBEDDINGS", "none")
    code, out = check()
    assert code == 0 and 'embeddings: off (words only: embeddings = "none"' in out


def test_an_altered_model_file_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(locate_model_files().model, copy)
    with copy.open("ab") as f:
        f.write(b"\0")
    monkeypatch.setenv("EVIDENT_EMBEDDINGS", "local")
    monkeypatch.setenv("EVIDENT_EMBEDDINGS_MODEL_FILE", str(copy))
    code, out = check("--json")
    report = json.loads(out)["embeddings"]
    assert code == 1 and report["state"] == "failed" and str(copy) in report["reason"]
    assert "Traceback" not in out


def test_a_server_that_fails_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(embeddings_status=503) as server:
        monkeypatch.setenv("EVIDENT_EMBEDDINGS", "openai")
        monkeypatch.setenv("EVIDENT_EMBEDDINGS_MODEL", "e5")
        monkeypatch.setenv("EVIDENT_EMBEDDINGS_BASE_URL", server.base_url)
        code, out = check("--json")
    report = json.loads(out)["embeddings"]
    assert code == 1 and report["state"] == "failed" and "HTTP 503" in report["reason"]


def test_the_full_check_reports_the_embeddings_before_the_chat_model() -> None:
    result = CliRunner().invoke(app, ["model", "check"])
    assert result.exit_code == 2 and "no model is configured" in result.output
    assert result.output.index("embeddings:") < result.output.index("no model is configured")
