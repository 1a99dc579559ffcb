"""Title first: among the retrieved pages, the one whose title the question names best leads
(docs/evaluation.md, "How the offline engine decides": retrieval)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evident.alignment.models import SourceDocument
from evident.connectors.index.embedded import LocalIndex, title_first_order
from evident.connectors.index.ranking import TITLE_FIRST_BOOST, title_first, title_share
from tests.support.index import build, urls

QUESTION = ["apply", "retirement", "benefits"]  # weighted_terms("How do I apply for retirement benefits?")


def test_title_share_counts_the_title_words_the_question_holds() -> None:
    question = frozenset({"apply", "retirement", "benefit"})
    assert title_share(question, "Apply for Retirement Benefits") == 1.0  # "for" is a stopword
    assert title_share(question, "Retirement Benefits for Survivors and Spouses") == 0.5
    assert title_share(question, "Survivors") == 0.0
    assert title_share(question, "") == 0.0


def test_the_page_the_question_names_goes_first_the_others_keep_their_order() -> None:
    hits = [("Benefits Planner: Survivors", 10.0), ("Retirement Benefits: Other Things", 9.5),
            ("Apply for Retirement Benefits", 9.0), ("Survivors", 8.0)]
    assert title_first(QUESTION, hits) == 2
    docs = [(SourceDocument(url=f"u{i}", title=title, content="text"), score) for i, (title, score) in enumerate(hits)]
    assert [doc.url for doc, _ in title_first_order(QUESTION, docs)] == ["u2", "u0", "u1", "u3"]
    # Scores stay the BM25 scores: only the order says which page leads.
    assert [score for _, score in title_first_order(QUESTION, docs)] == [9.0, 10.0, 9.5, 8.0]


def test_a_title_match_does_not_outweigh_a_much_better_page() -> None:
    # 9.0 x (1 + TITLE_FIRST_BOOST) < 14: the first page scored far better on its text.
    assert 9.0 * (1 + TITLE_FIRST_BOOST) < 14.0
    assert title_first(QUESTION, [("Survivors", 14.0), ("Apply for Retirement Benefits", 9.0)]) == 0


@pytest.mark.parametrize("hits", [
    [("Apply for Retirement Benefits", 9.0), ("Apply for Retirement Benefits (variant 2)", 9.0)],
    [("Survivors", 9.0), ("Spouses", 8.0)],  # no title holds a question word: BM25's order
    [("Survivors", 9.0)],
    [],
])
def test_ties_and_titles_without_question_words_keep_the_order(hits: list[tuple[str, float]]) -> None:
    assert title_first(QUESTION, hits) == 0


def test_without_the_boost_the_order_is_bm25s() -> None:
    hits = [("Survivors", 10.0), ("Apply for Retirement Benefits", 9.0)]
    assert title_first(QUESTION, hits) == 1
    assert title_first(QUESTION, hits, boost=0.0) == 0


def test_the_first_page_does_not_depend_on_how_many_are_asked_for(tmp_path: Path) -> None:
    # BM25 ranks the survivors' page first (its text repeats the question); the page named like the
    # question leads by its title, for k = 1 as for k = 8: it is chosen among the TITLE_FIRST_DEPTH best.
    question = "How do I apply for retirement benefits?"
    records = [
        {"url": "a-survivors", "title": "Apply for Retirement Benefits for Survivors and Spouses",
         "text": " ".join(["Apply for retirement benefits here."] * 5)},
        {"url": "c-apply", "title": "Apply for Retirement Benefits",
         "text": " ".join(["You can do it online at any time of the day."] * 20)},
    ] + [{"url": f"d-{i}", "title": f"Page {i}", "text": "Benefits for everyone."} for i in range(10)]
    with build(tmp_path, records) as index:
        for k in (1, 2, 3, 8):
            ranked = [doc.url for doc, _ in index.search(question, k)]
            assert len(ranked) == k and ranked[0] == "c-apply"
        with LocalIndex(index.path, title_first_boost=0.0) as bm25:
            assert urls(bm25, question)[:2] == ["a-survivors", "c-apply"]  # BM25 alone
        # SQLite FTS5 answers while the Tantivy mirror cannot be trusted (missing, the index opened
        # read-only): its BM25 differs (here the survivors' page stays first, by more than the boost),
        # but its first page does not depend on k.
        shutil.rmtree(f"{index.path}.tantivy")
        with LocalIndex(index.path, read_only=True) as fts5:
            assert fts5.mirror_generation is None
            firsts = {k: fts5.search(question, k)[0][0].url for k in (1, 2, 8)}
            assert set(firsts.values()) == {"a-survivors"}
        with LocalIndex(index.path, read_only=True, title_first_boost=2.0) as fts5:
            assert {fts5.search(question, k)[0][0].url for k in (1, 2, 8)} == {"c-apply"}
