"""SemMax and SemRecall (paper §6.2.3): windowing and aggregation by hand with a fake scorer, the facts
that must hold with the real local model, and embeddings off or failing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evident.context import EvidentContext
from evident.embeddings import EmbeddingsFailure, GraphEmbeddings
from evident.eval.dataset import EvalQuery
from evident.eval.records import CitedFact, MethodRecord, RetrievalRecord
from evident.eval.report import EvalResult, markdown
from evident.eval.runner import EvalRun
from evident.eval.semantic import (
    aggregate,
    answer_text,
    cited_documents,
    score_answer,
    score_row,
    score_run,
    windows,
)
from evident.eval.summary import Row
from evident.models import INSUFFICIENT_ANSWER

A, B, C = "https://kb.example/a", "https://kb.example/b", "https://kb.example/c"

# A page of the examples' kind and an answer copied from it, against one about something else.
PAGE = ("API keys can be rotated from the admin console. After a rotation the old key keeps working for a grace "
        "period, 24 hours by default, so that running jobs can switch to the new key. Revoking a key ends it at "
        "once.")
UNRELATED = "Expense reports must be submitted within 30 days of the end of a trip, with every receipt attached."


def _words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


# -- windowing, pure ------------------------------------------------------------------------------------


def test_a_short_or_blank_text_is_one_window_or_none() -> None:
    assert windows("") == [] and windows(" \n\t ") == []
    assert windows("  one   two\nthree ") == ["one two three"]
    assert windows(_words(256)) == [_words(256)]  # exactly one window's worth: no second window


def test_windows_overlap_by_the_stride_and_the_last_one_ends_at_the_text() -> None:
    # 10 words, size 4, stride 3: starts 0, 3, 6; the last ends at word 9.
    assert windows(_words(10), size=4, stride=3) == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    # 11 words: starts 0, 3, 6, and 7 so that w10 is not lost.
    assert windows(_words(11), size=4, stride=3)[-2:] == ["w6 w7 w8 w9", "w7 w8 w9 w10"]
    # The paper's geometry: 300 words give windows at 0 and 44 (= 300 - 256), 256 words each.
    got = windows(_words(300))
    assert [len(w.split()) for w in got] == [256, 256] and got[1].split()[0] == "w44"
    got = windows(_words(400))  # starts 0, 50, 100, then 144 for the tail
    assert [w.split()[0] for w in got] == ["w0", "w50", "w100", "w144"] and got[-1].split()[-1] == "w399"
    with pytest.raises(ValueError):
        windows("a b", size=0)


def test_aggregate_is_the_max_and_the_mean_of_row_maxima() -> None:
    sims = np.array([[0.2, 0.9, 0.1], [0.4, 0.1, 0.3]], dtype=np.float32)
    sem_max, sem_recall = aggregate(sims)
    assert sem_max == pytest.approx(0.9) and sem_recall == pytest.approx((0.9 + 0.4) / 2)
    with pytest.raises(ValueError):
        aggregate(np.zeros((0, 3), dtype=np.float32))


class FakeScorer:
    """Unit vectors from a table (text -> vector); counts how often each text is embedded."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls: list[str] = []

    def embed_texts(self, texts: Sequence[str]) -> Any:
        self.calls.extend(texts)
        rows = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_score_answer_embeds_each_distinct_window_once_and_never_spans_documents() -> None:
    # Two answer windows (a0-a3, a2-a5), two documents of one window each, one of them repeated.
    answer = "a0 a1 a2 a3 a4 a5"
    doc1, doc2 = "d0 d1 d2", "e0 e1"
    table = {"a0 a1 a2 a3": [1, 0], "a2 a3 a4 a5": [0, 1], doc1: [1, 0], doc2: [3, 4]}
    fake = FakeScorer(table)
    got = score_answer(answer, [doc1, doc2, doc1], fake, size=4, stride=2)
    assert got is not None
    assert sorted(fake.calls) == sorted(table)  # each window once; no window across doc1 and doc2
    assert (got.answer_windows, got.document_windows) == (2, 2)
    # Rows: [1, 0] meets doc1 at 1.0 and doc2 at 0.6; [0, 1] meets doc1 at 0 and doc2 at 0.8.
    assert got.sem_max == pytest.approx(1.0) and got.sem_recall == pytest.approx((1.0 + 0.8) / 2)
    assert score_answer("", [doc1], fake) is None and score_answer(answer, [" "], fake) is None


def _record(outcome: str, answer: str, facts: list[tuple[str, str]]) -> MethodRecord:
    return MethodRecord(key="k", query_id="1", method="x", outcome=outcome,  # type: ignore[arg-type]
                        answer=answer, facts=[CitedFact(sentence=s, url=u) for s, u in facts])


def _row(record: MethodRecord, documents: dict[str, str]) -> Row:
    q = EvalQuery(id="1", query="How long does an old key keep working?", gold_urls=[A])
    ret = RetrievalRecord(key="r", query_id="1", urls=list(documents), hashes=[])
    return Row(query=q, retrieval=ret, record=record, documents=documents)


def test_abstentions_and_answers_citing_nothing_are_undefined() -> None:
    fake = FakeScorer({})
    docs = {A: "alpha", B: "beta"}
    assert score_row(_row(_record("insufficient", INSUFFICIENT_ANSWER, []), docs), fake) is None
    assert score_row(_row(_record("answered", "It depends.", []), docs), fake) is None
    assert score_row(_row(_record("error", "", [("x", A)]), docs), fake) is None
    assert fake.calls == []


def test_d_is_the_cited_retrieved_documents_else_all_retrieved() -> None:
    docs = {A: "alpha text", B: "beta text", C: "gamma text"}
    rec = _record("answered", "x [a] y [c]", [("x", A + "/"), ("y", C), ("x", A)])
    assert answer_text(rec) == "x y"  # distinct facts, in order
    assert cited_documents(rec, docs) == (["alpha text", "gamma text"], False)
    outside = _record("answered", "z [1]", [("z", "[1]")])
    assert cited_documents(outside, docs) == (["alpha text", "beta text", "gamma text"], True)
    assert cited_documents(_record("answered", "z", []), docs) == ([], False)


class Failing:
    """A LangChain-shaped Embeddings whose every call fails as a server that is down would."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise EmbeddingsFailure("unreachable", "embeddings server at http://127.0.0.1:9 refused the connection")

    def embed_query(self, text: str) -> list[float]:
        raise EmbeddingsFailure("unreachable", "embeddings server at http://127.0.0.1:9 refused the connection")


def _run(rows: list[Row]) -> EvalRun:
    return EvalRun(rows={"evident": rows}, computed={})


def test_a_failing_embeddings_call_leaves_the_query_unscored_and_counted() -> None:
    rows = [_row(_record("answered", "x [a]", [("x", A)]), {A: "alpha"}),
            _row(_record("insufficient", INSUFFICIENT_ANSWER, []), {A: "alpha"})]
    sem = score_run({"evident": rows}, EvidentContext(), source=GraphEmbeddings(Failing()))  # type: ignore[arg-type]
    assert sem.on and sem.failed == {"evident": 1} and sem.scores["evident"] == [None, None]
    assert "refused the connection" in sem.failures[0]
    assert "1 query not scored (embeddings failed)" in sem.note()
    metrics = sem.metrics("evident")
    assert metrics["sem_max"].n == 0 and metrics["sem_max"].value is None


def test_embeddings_off_gives_absent_metrics_and_says_why() -> None:
    rows = [_row(_record("answered", "x [a]", [("x", A)]), {A: "alpha"})]
    ctx = EvidentContext(embeddings="none")
    sem = score_run({"evident": rows}, ctx)
    assert not sem.on and sem.metrics("evident") == {} and sem.status.startswith("off (")
    queries = [rows[0].query]
    result = EvalResult.build("q.jsonl", queries, _run(rows), ctx)
    assert "sem_max" not in result.metrics["evident"] and "sem_recall" not in result.metrics["evident"]
    assert result.semantic.startswith("semantic metrics: off (words only")
    report = markdown(result)
    assert "- semantic metrics: off (words only" in report and "SemMax and SemRecall (Table 4" not in report
    assert "semantic" not in result.records["evident"][0]


# -- the real local model -------------------------------------------------------------------------------


@pytest.mark.embeddings
def test_a_copied_answer_scores_about_one_and_above_an_unrelated_one() -> None:
    from evident.embeddings import resolve_embeddings

    scorer = resolve_embeddings(EvidentContext()).scorer
    assert scorer is not None, "the local embeddings model is not installed"
    copied = score_answer(PAGE, [PAGE], scorer)
    unrelated = score_answer(UNRELATED, [PAGE], scorer)
    assert copied is not None and unrelated is not None
    assert copied.sem_max == pytest.approx(1.0, abs=1e-3) and copied.sem_recall == pytest.approx(1.0, abs=1e-3)
    assert unrelated.sem_max < 0.3 and copied.sem_max - unrelated.sem_max > 0.5
    # A paraphrase lies in between: meaning, not words.
    para = score_answer("An old API key still works for a day after you rotate it.", [PAGE], scorer)
    assert para is not None and unrelated.sem_max < para.sem_max < copied.sem_max


@pytest.mark.embeddings
def test_semrecall_never_exceeds_semmax_and_the_report_shows_both() -> None:
    # An answer of several windows, half copied from the page and half about something else.
    long_answer = " ".join([PAGE] * 6 + [UNRELATED] * 10)
    rows = [_row(_record("answered", "...", [(long_answer, A)]), {A: PAGE, B: UNRELATED}),
            _row(_record("answered", "...", [(PAGE, A)]), {A: PAGE, B: UNRELATED}),
            _row(_record("insufficient", INSUFFICIENT_ANSWER, []), {A: PAGE})]
    ctx = EvidentContext()
    result = EvalResult.build("q.jsonl", [r.query for r in rows], _run(rows), ctx)
    mixed = result.records["evident"][0]["semantic"]
    assert mixed["answer_windows"] > 1
    assert mixed["sem_recall"] < mixed["sem_max"] - 0.05  # the unrelated windows pull the mean down
    for rec in result.records["evident"][:2]:
        assert rec["semantic"]["sem_recall"] <= rec["semantic"]["sem_max"] + 1e-6
    assert "semantic" not in result.records["evident"][2]  # the abstention: undefined
    assert result.metrics["evident"]["sem_max"].n == 2 and result.metrics["evident"]["sem_recall"].n == 2
    assert result.metrics["evident"]["sem_recall"].value <= result.metrics["evident"]["sem_max"].value  # type: ignore[operator]
    assert result.semantic.startswith("semantic metrics: on (local:all-MiniLM-L6-v2")
    report = markdown(result)
    assert "SemMax and SemRecall (Table 4 layout" in report and "sem_max ↑" in report
    assert "semantic metrics: off" not in report
