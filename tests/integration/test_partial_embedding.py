"""An index whose embedding is unfinished (interrupted, or still going on elsewhere) answers at once: by words
over every document, by meaning over the documents that have vectors, and says how far the embedding got.

The real local model over four small pages; an interruption is made by a progress callback that raises after
a given number of committed steps, as Ctrl-C would between two steps.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock
from numpy.typing import NDArray
from starlette.testclient import TestClient

from evident.connectors.background import BACKGROUND, BackgroundEmbedding
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.query_meaning import prepare_meaning
from evident.context import EvidentContext
from evident.embeddings import ResolvedEmbeddings, resolve_embeddings
from evident.embeddings.meaning import SEMANTIC_SCORE, SEMANTIC_WINDOWS, QueryMeaning
from evident.embeddings.scorer import SemanticScorer
from evident.graph import build_graph
from tests.integration.test_index_vectors import QUESTION, _corpus, _write
from tests.unit.test_request_settings import served_config
from tests.unit.test_web_auth import write_tokens

pytestmark = pytest.mark.embeddings

WAIT_S = 120.0  # a bound on waiting for a state, never a sleep: the states below arrive in seconds


@pytest.fixture(scope="module")
def resolved() -> ResolvedEmbeddings:
    found = resolve_embeddings(EvidentContext(embeddings="local"))
    assert found.scorer is not None, "the local model is installed in the test environment"
    return found


@pytest.fixture(scope="module")
def scorer(resolved: ResolvedEmbeddings) -> SemanticScorer:
    assert resolved.scorer is not None
    return resolved.scorer

# Shares no word with any page; by meaning it is the expense page's question.
OTHER_WORDS = "reimbursement deadline for travel costs"


class Interrupted(Exception):
    pass


def partly_embedded(index: LocalIndex, scorer: SemanticScorer, steps: int) -> None:
    """Embed one document per step and stop after `steps` committed steps."""

    def progress(done: int, total: int) -> None:
        if done >= steps:
            raise Interrupted

    with pytest.raises(Interrupted):
        index.embed(scorer, progress=progress, step_windows=1)


def test_a_partly_embedded_index_ranks_by_meaning_where_vectors_exist(tmp_path: Path, scorer: SemanticScorer) -> None:
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([_corpus(tmp_path)])
        partly_embedded(index, scorer, 2)  # ids follow the files' order: expenses, keys
        assert index.unembedded(scorer.model_id) == 2 and not index.ready(scorer.model_id)
        meaning = QueryMeaning(scorer, scorer.embed_query(QUESTION))
        words = index.search(QUESTION, 4)
        hybrid = index.search(QUESTION, 4, meaning=meaning)
        # Words reach every document: the unembedded ones are ranked as the words rank them.
        assert {d.url for d, _ in words} <= {d.url for d, _ in hybrid}
        by_url = {d.url: d for d, _ in hybrid}
        # The embedded pages carry their windows' cosines for the extractor; the others carry none (no 0
        # that would read as "unrelated").
        assert SEMANTIC_SCORE in by_url["https://w/keys"].metadata
        assert SEMANTIC_WINDOWS not in by_url["https://w/team"].metadata
        assert SEMANTIC_SCORE not in by_url["https://w/team"].metadata
        # Meaning alone reaches an embedded page that shares no word with the question, and no other.
        found = index.search(OTHER_WORDS, 4, meaning=QueryMeaning(scorer, scorer.embed_query(OTHER_WORDS)))
        assert [d.url for d, _ in found][0] == "https://w/expenses"
        assert {d.url for d, _ in found} <= {"https://w/expenses", "https://w/keys"}
        assert index.search(OTHER_WORDS, 4) == []


def _partial_retriever(tmp_path: Path, scorer: SemanticScorer, steps: int) -> tuple[Path, LocalCorpusRetriever]:
    """The corpus and a retriever over its index, `steps` documents of it embedded (an interrupted
    `evident index`), opened as `evident ask --corpus` opens it: by a refresh that changes nothing."""
    folder, path = _corpus(tmp_path), tmp_path / "i.sqlite3"
    with LocalIndex(path) as index:
        index.refresh([folder])
        partly_embedded(index, scorer, steps)
    return folder, LocalCorpusRetriever.from_corpus(folder, index_path=path, k=4)


def test_a_question_over_an_unfinished_embedding_is_answered_at_once_and_says_so(
    tmp_path: Path, resolved: ResolvedEmbeddings, scorer: SemanticScorer
) -> None:
    _, retriever = _partial_retriever(tmp_path, scorer, 1)
    prepared = prepare_meaning(retriever, resolved, QUESTION, 0.4)
    # Not taken over by the question: the embedding is `evident index`'s to finish.
    assert retriever.missing_vectors(scorer.model_id) == (3, 4)
    assert prepared.meaning is not None
    [error] = prepared.errors
    assert error.source == "embeddings"
    assert error.message == ("source local was ranked by meaning over part of its documents, the others by words only: "
                             "its embedding is unfinished (`evident index` finishes it)")
    found = {d.metadata["url"]: d for d in retriever.invoke(QUESTION, meaning=prepared.meaning)}
    # The words' pages, and the one embedded page by its meaning.
    assert {"https://w/keys", "https://w/team"} <= set(found)
    assert SEMANTIC_SCORE in found["https://w/expenses"].metadata
    assert SEMANTIC_SCORE not in found["https://w/keys"].metadata


def test_a_question_embeds_what_its_own_refresh_changed(tmp_path: Path, resolved: ResolvedEmbeddings,
                                                        scorer: SemanticScorer) -> None:
    folder, retriever = _partial_retriever(tmp_path, scorer, 4)
    assert retriever.missing_vectors(scorer.model_id) == (0, 4)
    _write(folder, "expenses.md", "https://w/expenses", "Expense reports",
           "Submit an expense report within sixty days of the end of a trip, with every receipt.")
    changed = LocalCorpusRetriever.from_corpus(folder, index_path=retriever.index_path, k=4)
    assert changed.missing_vectors(scorer.model_id) == (1, 4)
    prepared = prepare_meaning(changed, resolved, QUESTION, 0.4)
    assert prepared.errors == [] and changed.missing_vectors(scorer.model_id) == (0, 4)


class Gated(SemanticScorer):
    """The real model, held before its `hold_at`-th batch of windows until `release` is set."""

    def __init__(self, real: SemanticScorer, hold_at: int) -> None:
        super().__init__(real.embeddings, model_id=real.model_id, batch_size=real.batch_size, cache=real.cache)
        self.calls = 0
        self.hold_at = hold_at
        self.holding = threading.Event()
        self.release = threading.Event()

    def embed_texts(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.calls == self.hold_at:
            self.holding.set()
            assert self.release.wait(WAIT_S)
        return super().embed_texts(texts)


def test_a_served_index_embeds_in_the_background_resumes_after_a_stop_and_lets_writers_in(
    tmp_path: Path, resolved: ResolvedEmbeddings, scorer: SemanticScorer
) -> None:
    folder, retriever = _partial_retriever(tmp_path, scorer, 1)
    retriever.embed_step_windows = 1  # a step per document
    background = BackgroundEmbedding()
    gated = Gated(scorer, hold_at=2)
    # What a served query does: it never embeds before its search, it hands the index to the background.
    prepared = prepare_meaning(retriever, ResolvedEmbeddings(resolved.embeddings, "local", scorer.model_id,
                                                             _scorer=[gated]),
                               QUESTION, 0.4, before_search=False, background=background)
    assert prepared.errors[0].message.endswith("its embedding goes on in the background")
    assert gated.holding.wait(WAIT_S)  # the second step's windows are being embedded
    # Meanwhile a question is answered from what is committed, and a refresh by another writer goes through:
    # the write lock is held per step, not while the model works.
    assert len(retriever.invoke(QUESTION, meaning=prepared.meaning)) >= 2
    _write(folder, "team.md", "https://w/team", "Team notes", "The API working group meets on Mondays now.")
    with LocalIndex(retriever.index_path, lock_timeout_s=1.0) as writer:
        assert writer.refresh([folder]).updated == 1
    # The server shuts down: the run ends after the step under way, which commits.
    assert not background.stop(timeout_s=0.0)
    gated.release.set()
    assert background.wait(WAIT_S)
    missing, total = retriever.missing_vectors(scorer.model_id)
    assert 0 < missing < 3 and total == 4
    # The next start goes on from there: only what is missing is embedded.
    assert background.embed("local", retriever, scorer)
    assert background.wait(WAIT_S)
    assert retriever.missing_vectors(scorer.model_id) == (0, 4)
    assert background.status()["local"].startswith(f"done ({missing} documents in ")
    # Later questions rank every document by meaning too, and report nothing missing.
    again = prepare_meaning(retriever, resolved, QUESTION, 0.4, before_search=False, background=background)
    assert again.errors == []
    found = retriever.invoke(QUESTION, meaning=again.meaning)
    assert len(found) == 4 and all(SEMANTIC_SCORE in d.metadata for d in found)


def test_a_served_question_is_answered_at_once_while_the_server_embeds_in_the_background(
    tmp_path: Path, scorer: SemanticScorer
) -> None:
    _, retriever = _partial_retriever(tmp_path, scorer, 1)
    built = build_graph(retriever_factory=lambda ctx: retriever)
    first = built.invoke({"query": QUESTION}, config=served_config())
    assert first["status"] == "degraded" and first["answer"]
    assert [e["message"] for e in first["source_errors"]] == [
        "source local was ranked by meaning over part of its documents, the others by words only: "
        "its embedding goes on in the background"]
    assert BACKGROUND.wait(WAIT_S)
    assert retriever.missing_vectors(scorer.model_id) == (0, 4)
    later = built.invoke({"query": QUESTION}, config=served_config())
    assert later["source_errors"] == [] and later["status"] == "answered"
    assert all(SEMANTIC_SCORE in d["metadata"] for d in later["documents"])


def test_the_server_starts_embedding_an_unfinished_index_when_it_opens_it(
    tmp_path: Path, scorer: SemanticScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evident.web.app import app

    folder, retriever = _partial_retriever(tmp_path, scorer, 2)
    monkeypatch.setenv("EVIDENT_CORPUS", str(folder))
    monkeypatch.setenv("EVIDENT_INDEX", str(retriever.index_path))
    with TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000)) as client:
        assert BACKGROUND.wait(WAIT_S)
        assert retriever.missing_vectors(scorer.model_id) == (0, 4)
        assert client.get("/health").json()["embedding"]["local"].startswith("done (2 documents in ")


def test_a_user_sees_the_embeddings_state_but_not_its_counts_or_errors(
    tmp_path: Path, scorer: SemanticScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With authentication, a signed-in user is not the operator: how many documents were embedded takes in
    the ones the user may not see, and a failure's message names the deployment's files."""
    from evident.web.app import app

    folder, retriever = _partial_retriever(tmp_path, scorer, 2)
    monkeypatch.setenv("EVIDENT_CORPUS", str(folder))
    monkeypatch.setenv("EVIDENT_INDEX", str(retriever.index_path))
    tokens = write_tokens(tmp_path / "tokens.json", **{"staff-token": ("sam", ["staff"])})
    monkeypatch.setenv("EVIDENT_AUTH_TOKENS_FILE", str(tokens))
    with TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000)) as client:
        assert BACKGROUND.wait(WAIT_S)
        assert BACKGROUND.status()["local"].startswith("done (2 documents in ")
        health = client.get("/health", headers={"Authorization": "Bearer staff-token"}).json()
        assert health["embedding"] == {"local": "done"}


def test_a_server_told_not_to_embeds_nothing_and_says_what_finishes_it(
    tmp_path: Path, scorer: SemanticScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, retriever = _partial_retriever(tmp_path, scorer, 1)
    monkeypatch.setenv("EVIDENT_EMBEDDINGS_BACKGROUND", "false")
    built = build_graph(retriever_factory=lambda ctx: retriever)
    out = built.invoke({"query": QUESTION}, config=served_config())
    assert out["source_errors"][0]["message"].endswith("its embedding is unfinished (`evident index` finishes it)")
    assert retriever.missing_vectors(scorer.model_id) == (3, 4)


def test_a_question_embeds_an_index_built_by_words_alone(tmp_path: Path, resolved: ResolvedEmbeddings,
                                                         scorer: SemanticScorer) -> None:
    # No embedding ever started on it: the question does what `evident index` with embeddings on would have.
    folder = _corpus(tmp_path)
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([folder])
    retriever = LocalCorpusRetriever.from_corpus(folder, index_path=tmp_path / "i.sqlite3")
    assert retriever.embed_up_to == 0 and retriever.embeds_before_search(scorer.model_id)
    assert prepare_meaning(retriever, resolved, QUESTION, 0.4).errors == []
    assert retriever.missing_vectors(scorer.model_id) == (0, 4)


def test_one_process_embeds_an_index_at_a_time(tmp_path: Path, resolved: ResolvedEmbeddings,
                                               scorer: SemanticScorer) -> None:
    _, retriever = _partial_retriever(tmp_path, scorer, 1)
    background = BackgroundEmbedding()
    # Another process (an `evident index`, another replica) is embedding this index: it is left to it.
    with FileLock(f"{retriever.index_path}.embedding.lock"):
        assert background.embed("local", retriever, scorer)
        assert background.wait(WAIT_S)
        assert background.status() == {"local": "elsewhere"}
        assert retriever.missing_vectors(scorer.model_id) == (3, 4)
        # Asked again meanwhile, it does not look again before RETRY_AFTER_S; the embedding goes on (there).
        prepared = prepare_meaning(retriever, resolved, QUESTION, 0.4, before_search=False, background=background)
        assert prepared.errors[0].message.endswith("its embedding goes on in the background")
        # `evident index`, asked by its user, embeds beside it; each step stores only what is still missing.
        with LocalIndex(retriever.index_path) as index:
            assert index.embed(scorer, beside_another=False).elsewhere
            assert index.embed(scorer).documents == 3
    assert retriever.missing_vectors(scorer.model_id) == (0, 4)


def test_a_candidate_without_vectors_is_fused_by_its_words_alone() -> None:
    from evident.embeddings.meaning import fuse

    # Words 10, 5, 8; meaning 0.5, 0.25 and unknown: the third ranks as the words rank it (0.8), where a
    # cosine of 0 would have sunk it below the second, and it does not set the best cosine's scale.
    assert fuse([10.0, 5.0, 8.0], [0.5, 0.25, None], 0.4) == pytest.approx([1.0, 0.5, 0.8])
    assert fuse([10.0, 5.0, 8.0], [0.5, 0.25, 0.0], 0.4) == pytest.approx([1.0, 0.5, 0.48])
