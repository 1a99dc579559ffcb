"""Meaning for sources that rank by words alone, and no meaning from sources that claim it.

`rerank_by_meaning` re-orders one source's results by the real local model's cosines (the tests marked
`embeddings`); `source_call.collect` drops the `SEMANTIC_SCORE` / `SEMANTIC_WINDOWS` metadata of every
source that is not `RanksByMeaning`, so a wiki or a third-party retriever cannot pick the sentence the
offline extractor quotes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.rerank import MAX_WINDOWS, rerank_by_meaning
from evident.connectors.source import RanksByMeaning, Source
from evident.connectors.source_call import call_untraced, collect
from evident.context import EvidentContext
from evident.embeddings import resolve_embeddings
from evident.embeddings.meaning import SEMANTIC_SCORE, SEMANTIC_WINDOWS, QueryMeaning
from evident.embeddings.scorer import SemanticScorer
from evident.embeddings.windows import passage_windows, window_text
from evident.graph import build_graph
from evident.models import SourceDocument
from evident.offline.extractor import extract_passages

QUESTION = "How long does an old API key keep working after I rotate it?"
KEYS = SourceDocument(
    url="https://wiki.example/keys",
    title="Credentials",
    content="After a key rotation, the previous secret is still accepted for 24 hours, then it is refused.",
    metadata={"space": "SEC"},
)
EXPENSES = SourceDocument(
    url="https://wiki.example/expenses",
    title="Expense reports",
    content="Submit an expense report within thirty days of the end of a trip.",
)
LAPTOP = SourceDocument(
    url="https://wiki.example/laptop",
    title="Devices",
    content="A lost or stolen device must be reported to security within one hour.",
)


@pytest.fixture(scope="module")
def scorer() -> SemanticScorer:
    found = resolve_embeddings(EvidentContext(embeddings="local")).scorer
    assert found is not None, "the local model is installed in the test environment"
    return found


def _meaning(scorer: SemanticScorer, query: str = QUESTION, weight: float = 0.4) -> QueryMeaning:
    return QueryMeaning(scorer, scorer.embed_query(query), weight)


def _urls(docs: list[SourceDocument]) -> list[str]:
    return [d.url for d in docs]


@pytest.mark.embeddings
def test_the_page_that_answers_in_other_words_moves_up(scorer: SemanticScorer) -> None:
    # The source put the answer second: its rank is worth 0.5 of the first's, its meaning far more.
    assert _urls(rerank_by_meaning([EXPENSES, KEYS], _meaning(scorer))) == [KEYS.url, EXPENSES.url]
    # Last of three, it climbs over the page that means least; none is lost or repeated.
    three = rerank_by_meaning([EXPENSES, LAPTOP, KEYS], _meaning(scorer))
    assert sorted(_urls(three)) == sorted([EXPENSES.url, LAPTOP.url, KEYS.url])
    assert _urls(three).index(KEYS.url) < 2


@pytest.mark.embeddings
def test_with_no_weight_the_sources_order_stands(scorer: SemanticScorer) -> None:
    docs = [EXPENSES, LAPTOP, KEYS]
    reranked = rerank_by_meaning(docs, _meaning(scorer, weight=0.0))
    assert _urls(reranked) == _urls(docs)
    # The meaning is still measured and carried, for the extractor and the trace.
    assert all(SEMANTIC_SCORE in d.metadata for d in reranked)
    assert rerank_by_meaning([], _meaning(scorer)) == []


@pytest.mark.embeddings
def test_every_result_carries_the_cosines_of_its_windows(scorer: SemanticScorer) -> None:
    meaning = _meaning(scorer)
    forged = KEYS.model_copy(update={"metadata": {**KEYS.metadata, SEMANTIC_WINDOWS: [[0, 5, 0.99]]}})
    reranked = {d.url: d for d in rerank_by_meaning([EXPENSES, LAPTOP, forged], meaning)}
    for original in (EXPENSES, LAPTOP, KEYS):
        doc = reranked[original.url]
        spans = passage_windows(original.content)
        windows = doc.metadata[SEMANTIC_WINDOWS]
        # Each window is a span of the page's own text, with the cosine the model gives its text.
        assert [(s, e) for s, e, _ in windows] == spans
        expected = scorer.similarities(meaning.vector, [window_text(doc.title, doc.content, s, e) for s, e in spans])
        assert [c for _, _, c in windows] == pytest.approx([float(x) for x in expected], abs=1e-4)
        assert doc.metadata[SEMANTIC_SCORE] == pytest.approx(max(c for _, _, c in windows), abs=1e-4)
        # The page itself is unchanged, and so is the metadata it came with.
        assert (doc.content, doc.title) == (original.content, original.title)
        assert {k: v for k, v in doc.metadata.items() if k not in (SEMANTIC_SCORE, SEMANTIC_WINDOWS)} == (
            original.metadata
        )
    # The result's own windows replace the ones it arrived with, and the input documents are not changed.
    assert reranked[KEYS.url].metadata[SEMANTIC_WINDOWS] != [[0, 5, 0.99]]
    assert forged.metadata[SEMANTIC_WINDOWS] == [[0, 5, 0.99]] and SEMANTIC_SCORE not in EXPENSES.metadata
    assert reranked[KEYS.url].metadata[SEMANTIC_SCORE] > reranked[EXPENSES.url].metadata[SEMANTIC_SCORE] + 0.3


@pytest.mark.embeddings
def test_only_the_opening_windows_of_a_long_page_are_embedded(scorer: SemanticScorer) -> None:
    manual = SourceDocument(
        url="https://docs.example/manual",
        title="Manual",
        content="\n".join(f"Chapter {n} explains the {n}th setting of the console in some detail." for n in range(80)),
    )
    assert len(passage_windows(manual.content)) > MAX_WINDOWS
    [doc] = rerank_by_meaning([manual], _meaning(scorer))
    assert [(s, e) for s, e, _ in doc.metadata[SEMANTIC_WINDOWS]] == passage_windows(manual.content)[:MAX_WINDOWS]


# -- what a source's own metadata may not do ----------------------------------------------------

A = "Employees must book flights through the TravelDesk portal at least 14 days before departure."
B = "Employees can also book rail tickets through the TravelDesk portal."
TRAVEL = f"# Travel policy\n\n{A}\n\n{B}\n"
TRAVEL_QUESTION = "How early must employees book flights through the TravelDesk portal?"
# The windows a source might forge: the rail sentence "means" the question, the flights one does not.
FORGED = [[TRAVEL.index(A), TRAVEL.index(A) + len(A), -0.2], [TRAVEL.index(B), TRAVEL.index(B) + len(B), 1.0]]


def _forged_document() -> Document:
    return Document(
        page_content=TRAVEL,
        metadata={
            "url": "https://wiki.example/travel",
            "title": "Travel policy",
            "space": "HR",
            SEMANTIC_SCORE: 0.99,
            SEMANTIC_WINDOWS: FORGED,
        },
    )


class Forging(BaseRetriever):
    """A source that ranks by words (no `RanksByMeaning`) yet sends meaning metadata of its own."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [_forged_document()]


class Trusted(RanksByMeaning, BaseRetriever):
    """The same answer from a source that declares it ranks by meaning: its windows are kept."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [_forged_document()]


def _collected(retriever: BaseRetriever) -> SourceDocument:
    source = Source(name="wiki", retriever=retriever)
    answer = call_untraced(source, TRAVEL_QUESTION, None)
    docs, denied, problem = collect(source, answer.raw, None)
    assert (len(docs), denied, problem) == (1, 0, None)
    return docs[0]


def test_forged_meaning_is_what_would_steer_the_extractor() -> None:
    # The premise of the tests below: read as they arrive, the forged windows put the rail sentence first.
    doc = SourceDocument(
        url="https://wiki.example/travel", title="Travel policy", content=TRAVEL, metadata={SEMANTIC_WINDOWS: FORGED}
    )
    assert extract_passages(TRAVEL_QUESTION, [doc], semantic_weight=0.4)[0].content == B
    assert [p.content for p in extract_passages(TRAVEL_QUESTION, [doc], semantic_weight=0.0)] == [A]


def test_a_source_that_does_not_rank_by_meaning_loses_its_meaning_metadata() -> None:
    doc = _collected(Forging())
    assert SEMANTIC_SCORE not in doc.metadata and SEMANTIC_WINDOWS not in doc.metadata
    assert doc.metadata == {"space": "HR"}  # the rest of its metadata is its own to give
    assert [p.content for p in extract_passages(TRAVEL_QUESTION, [doc], semantic_weight=0.4)] == [A]


def test_a_source_that_ranks_by_meaning_keeps_its_windows() -> None:
    doc = _collected(Trusted())
    assert doc.metadata[SEMANTIC_WINDOWS] == FORGED and doc.metadata[SEMANTIC_SCORE] == 0.99


def _answer(retriever: BaseRetriever) -> dict[str, Any]:
    # Embeddings off: nothing re-ranks the source's results, so only the stripping stands between the
    # forged windows and the extractor (which reads meaning at the default weight whenever it is there).
    return build_graph(retriever=retriever).invoke(
        {"query": TRAVEL_QUESTION}, context=EvidentContext(embeddings="none")
    )


def test_the_graph_quotes_what_the_words_find_whatever_a_source_claims() -> None:
    out = _answer(Forging())
    assert out["status"] == "answered"
    assert out["citations"] and out["citations"][0]["quote"] == A
    assert all(B not in c["quote"] for c in out["citations"])
    assert not any(SEMANTIC_WINDOWS in d["metadata"] for d in out["documents"])
    # The same page from a source trusted with meaning is read by its windows: the marker is what decides.
    trusted = _answer(Trusted())
    assert trusted["citations"][0]["quote"] == B


def test_a_corpus_file_cannot_pose_as_the_index_scores_by_meaning(tmp_path: Path) -> None:
    # The embedded index ranks by meaning itself, so `collect` keeps its metadata: the forged windows of a
    # corpus line must be dropped when the index reads the page back, with embeddings off or on.
    corpus = tmp_path / "pages.jsonl"
    line = {"url": "https://wiki.example/travel", "title": "Travel policy", "text": TRAVEL,
            "metadata": {"space": "HR", SEMANTIC_WINDOWS: FORGED, SEMANTIC_SCORE: 0.99}}
    corpus.write_text(json.dumps(line) + "\n", encoding="utf-8")
    local = LocalCorpusRetriever.from_corpus([corpus], index_path=tmp_path / "i.sqlite3")
    out = _answer(local)
    assert out["status"] == "answered" and out["citations"][0]["quote"] == A
    assert all(B not in c["quote"] for c in out["citations"])
    assert [d["metadata"].get("space") for d in out["documents"]] == ["HR"]
    assert not any(k in d["metadata"] for d in out["documents"] for k in (SEMANTIC_WINDOWS, SEMANTIC_SCORE))
