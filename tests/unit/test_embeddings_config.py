"""Embeddings settings: `[embeddings]` in evident.toml, the environment over it, the caller over both;
a misspelt key is an error naming the file; a served request may not set any of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from evident.context import EvidentContext
from evident.embeddings import EmbeddingsSettings, GraphEmbeddings, embeddings_note
from evident.graph import build_graph
from evident.request_settings import REQUEST_SETTINGS, ContextWithDefaults, split_request_settings
from evident.settings import ConfigError

# The real resolution of the settings (conftest.py sets words only for unmarked tests).
pytestmark = pytest.mark.embeddings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("EVIDENT_CONFIG", "EVIDENT_EMBEDDINGS", "EVIDENT_EMBEDDINGS_MODEL", "EVIDENT_EMBEDDINGS_BASE_URL",
                "EVIDENT_EMBEDDINGS_TIMEOUT", "EVIDENT_EMBEDDINGS_MODEL_FILE", "EVIDENT_EMBEDDINGS_THREADS",
                "EVIDENT_EMBEDDINGS_BACKGROUND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evident.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_section_is_read_and_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[embeddings]\nprovider = "openai"\nmodel = "bge-small"\n'
                           'base_url = "http://127.0.0.1:8080/v1"\ndimensions = 256\ntimeout_s = 3\n'
                           'batch_size = 16\nmodel_file = "models/m.onnx"\nthreads = 2\n')
    settings = EmbeddingsSettings.from_context(EvidentContext.from_env(path))
    assert settings == EmbeddingsSettings(provider="openai", model="bge-small", base_url="http://127.0.0.1:8080/v1",
                                          dimensions=256, timeout_s=3, batch_size=16,
                                          model_file=str(tmp_path / "models" / "m.onnx"), threads=2)


def test_environment_overrides_the_file_and_the_caller_overrides_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[embeddings]\nprovider = "openai"\nmodel = "from-file"\ntimeout_s = 3\n')
    monkeypatch.setenv("EVIDENT_EMBEDDINGS_MODEL", "from-env")
    monkeypatch.setenv("EVIDENT_EMBEDDINGS_TIMEOUT", "7.5")
    ctx = EvidentContext.from_env(path)
    assert (ctx.embeddings, ctx.embeddings_model, ctx.embeddings_timeout_s) == ("openai", "from-env", 7.5)
    ctx = EvidentContext.from_env(path, embeddings="none", embeddings_model="from-caller")
    assert (ctx.embeddings, ctx.embeddings_model) == ("none", "from-caller")
    monkeypatch.setenv("EVIDENT_EMBEDDINGS", "none")
    assert EvidentContext.from_env(path).embeddings == "none"


def test_a_misspelt_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[embeddings]\nprovider = "local"\nmodle = "x"\n')
    with pytest.raises(ConfigError) as raised:
        EvidentContext.from_env(path)
    assert str(path) in str(raised.value) and "'modle'" in str(raised.value) and "[embeddings]" in str(raised.value)


def test_an_unknown_provider_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENT_EMBEDDINGS", "word2vec")
    with pytest.raises(ConfigError, match="invalid setting embeddings"):
        EvidentContext.from_env()


def test_a_served_request_may_not_set_any_embeddings_setting() -> None:
    names = [n for n in EvidentContext.model_fields if n.startswith("embeddings")]
    assert len(names) == 11 and not set(names) & REQUEST_SETTINGS
    allowed, refused = split_request_settings({"embeddings": "openai", "embeddings_base_url": "http://evil.test/v1",
                                               "embeddings_model_file": "/etc/passwd", "top_n": 3})
    assert allowed == {"top_n": 3}
    assert {e.setting for e in refused} == {"embeddings", "embeddings_base_url", "embeddings_model_file"}
    assert {e.status for e in refused} == {403}
    assert "embeddings" not in ContextWithDefaults.model_json_schema()["properties"]


class Fixed(Embeddings):
    model = "fixed-3"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(t)), 0.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


def test_given_embeddings_and_factories_are_resolved_per_run() -> None:
    given = GraphEmbeddings(Fixed())
    resolved = given.resolve(EvidentContext())
    assert resolved.on and resolved.provider == "custom" and resolved.model_id is not None
    assert "Fixed" in resolved.model_id and "fixed-3" in resolved.model_id
    assert not given.resolve(EvidentContext(embeddings="none")).on  # the deployment can switch them off

    factory = GraphEmbeddings(lambda ctx: Fixed() if ctx.top_n > 3 else None)
    assert factory.resolve(EvidentContext(top_n=8)).on
    off = factory.resolve(EvidentContext(top_n=2))
    assert not off.on and not off.fault and embeddings_note(off) == f"embeddings: off ({off.reason})"

    def broken(ctx: EvidentContext) -> Embeddings:
        raise RuntimeError("no GPU today")

    failed = GraphEmbeddings(broken).resolve(EvidentContext())
    assert failed.fault and "no GPU today" in failed.reason


def test_build_graph_accepts_embeddings_and_refuses_other_things() -> None:
    graph = build_graph(embeddings=Fixed())
    # The stub's cosines mean nothing (about 0.01 for any text): the answerability gate reads words alone.
    out = graph.invoke({"query": "How many days do I have to submit an expense report after a trip?"},
                       context=EvidentContext(mode="offline", answer_meaning_weight=0.0))
    assert out["status"] == "answered"
    build_graph(embeddings=lambda ctx: None)
    with pytest.raises(TypeError, match="Embeddings"):
        build_graph(embeddings="all-MiniLM-L6-v2")  # type: ignore[arg-type]


def test_words_only_by_choice_is_no_fault() -> None:
    resolved = GraphEmbeddings().resolve(EvidentContext(embeddings="none"))
    assert not resolved.on and not resolved.fault and embeddings_note(resolved) == (
        'embeddings: off (words only: embeddings = "none" in the settings)')


def test_the_local_model_uses_every_core_it_may_run_on_unless_told() -> None:
    import os

    from evident.embeddings.local import LocalEmbeddings, available_cores

    assert EvidentContext().embeddings_threads is None
    assert EmbeddingsSettings.from_context(EvidentContext()).threads is None
    assert available_cores() == len(os.sched_getaffinity(0))
    assert LocalEmbeddings().threads == available_cores()  # no model is loaded to know this
    assert LocalEmbeddings(threads=1).threads == 1


def test_a_server_embeds_in_the_background_unless_told_not_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert EvidentContext().embeddings_background
    path = write(tmp_path, "[embeddings]\nbackground = false\n")
    assert not EvidentContext.from_env(path).embeddings_background
    monkeypatch.setenv("EVIDENT_EMBEDDINGS_BACKGROUND", "true")
    assert EvidentContext.from_env(path).embeddings_background
