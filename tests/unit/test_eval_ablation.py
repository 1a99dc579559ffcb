"""The (n, t) sweep of App. G over recorded passages, against overlaps computed by hand."""

from __future__ import annotations

from evident.eval.ablation import sweep
from evident.eval.dataset import EvalQuery
from evident.eval.records import MethodRecord, RetrievalRecord
from evident.eval.summary import Row

URL = "https://kb.example/policy"
DOC = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"


def _row() -> Row:
    passages = [
        {"passage_id": "1", "url": URL, "content": "alpha bravo charlie delta echo foxtrot"},  # verbatim
        {"passage_id": "2", "url": URL, "content": "purple monkeys dance under a silver moon"},  # invented
        # The first 8 words of the document, then 4 invented words. n = 3: 10 trigrams, the 6 inside
        # the first 8 words are shared -> overlap 0.6; n = 5: 8 five-grams, 4 shared -> 0.5.
        {"passage_id": "3", "url": URL,
         "content": "alpha bravo charlie delta echo foxtrot golf hotel zulu yankee xray whiskey"},
    ]
    q = EvalQuery(id="q", query="q?", gold_urls=[URL])
    rec = MethodRecord(key="k", query_id="q", method="evident", outcome="answered", passages=passages)
    return Row(query=q, retrieval=RetrievalRecord(key="r", query_id="q", urls=[URL], hashes=[]), record=rec,
               documents={URL: DOC})


def test_sweep_by_hand() -> None:
    cells = {(c.n, c.t): c for c in sweep([_row()], ns=(3, 5), thresholds=(0.5, 0.7))}
    assert set(cells) == {(3, 0.5), (3, 0.7), (5, 0.5), (5, 0.7)}
    for c in cells.values():
        # The invented passage is dropped everywhere; the partial one is kept or truncated.
        assert (c.retention.hits, c.retention.n) == (2, 3)
        # What survives is source text: nothing is below the threshold after filtering.
        assert c.hallucination_post_filter.hits == 0
        # Retained quotes of 6 and 8 words hold no 10-gram.
        assert c.cov_at_10.n == 0
    assert cells[(3, 0.5)].hallucination_pre_filter.hits == 1  # 0 only (0.6 >= 0.5)
    assert cells[(3, 0.7)].hallucination_pre_filter.hits == 2  # 0 and 0.6
    assert cells[(5, 0.5)].hallucination_pre_filter.hits == 1  # 0 only (0.5 is not below 0.5)
    assert cells[(5, 0.7)].hallucination_pre_filter.hits == 2


def test_sweep_skips_queries_without_recorded_passages() -> None:
    row = _row()
    row.record.passages = []
    assert all(c.retention.n == 0 for c in sweep([row], ns=(5,), thresholds=(0.7,)))
