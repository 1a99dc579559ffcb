"""Every metric of `evident eval` on small cases computed by hand."""

from __future__ import annotations

import pytest

from evident.eval import metrics as m
from evident.eval.citations import is_abstention, numbered_facts, split_references
from evident.eval.dataset import EvalQuery
from evident.eval.records import CitedFact, MethodRecord, RetrievalRecord
from evident.eval.summary import Row, compare, method_metrics

A, B, C = "https://kb.example/a", "https://kb.example/b", "https://kb.example/c"


def test_hallucination_is_any_citation_outside_the_retrieved_set() -> None:
    assert m.hallucinated([A, B], [A, B, C]) is False
    assert m.hallucinated([A, "https://invented.example/x"], [A, B]) is True
    assert m.hallucinated([], [A]) is False
    # A trailing slash, a #fragment or capitals do not make a retrieved page a different one.
    assert m.hallucinated(["HTTPS://kb.example/a/#part"], [A]) is False


def test_groundedness_first_citation_and_cited_url_precision() -> None:
    gold = {B}
    assert m.grounded([A, B], gold) is True
    assert m.grounded([A, C], gold) is False
    assert m.first_citation_gold([A, B], gold) is False
    assert m.first_citation_gold([B, A], gold) is True
    assert m.first_citation_gold([], gold) is None
    # Citing every page keeps groundedness at 1 but cited-URL precision at 1/3.
    assert m.cited_url_hits([A, B, C, B], gold) == (1, 3)


def test_evidence_recall_ignores_whitespace_and_case() -> None:
    gold = ["Reports must be  submitted\nwithin 30 days."]
    assert m.evidence_found(["Note: reports MUST be submitted within 30 days. Late ones are refused."], gold)
    assert not m.evidence_found(["Reports must be submitted within 45 days."], gold)
    assert not m.evidence_found(["anything"], ["", "  "])


def test_overlap_counts_by_hand() -> None:
    # A = "a b c a b" has bigrams ab, bc, ca, ab; D = "a b x a b y" has ab, bx, xa, ab, by.
    # Multiset intersection: ab twice -> I_2 = 2, |G_2(A)| = 4, |G_2(D)| = 5.
    assert m.overlap_counts("a b c a b", "a b x a b y", 2) == (2, 4, 5)
    # Word overlap (n = 1): a:2, b:2 shared, c not -> O = 4 of |U| = 5, |V| = 6.
    assert m.overlap_counts("a b c a b", "a b x a b y", 1) == (4, 5, 6)


def test_anscov_and_docfocus_average_over_cited_facts() -> None:
    docs = {A: "one two three four five six", B: "alpha beta gamma"}
    facts = [
        CitedFact(sentence="one two three", url=A),  # bigrams 12, 23 both in A: AnsCov 1, DocFocus 2/5
        CitedFact(sentence="alpha beta delta", url=B),  # ab in B, bd not: AnsCov 1/2, DocFocus 1/2
        CitedFact(sentence="one two three", url=A),  # the same pair again counts once
    ]
    anscov, focus = m.coverage(facts, docs, 2)  # type: ignore[misc]
    assert anscov == pytest.approx((1 + 0.5) / 2)
    assert focus == pytest.approx((2 / 5 + 1 / 2) / 2)
    # A URL that was not retrieved has no text to trace to: it scores 0.
    anscov, focus = m.coverage([CitedFact(sentence="one two three", url=C)], docs, 2)  # type: ignore[misc]
    assert (anscov, focus) == (0.0, 0.0)
    assert m.coverage([], docs, 2) is None
    # Shorter than n words: nothing to measure.
    assert m.coverage([CitedFact(sentence="one", url=A)], docs, 2) is None


def test_answer_length_leaves_citations_and_references_out() -> None:
    answer = "First point here. [1]\nSecond one! [2][3]\n\nReferences:\n[1] https://a.example\n[2] https://b.example"
    assert m.answer_length(answer) == (2, 5)
    assert m.answer_length(f"Expense reports are due in 30 days. [{A}]") == (1, 7)
    # "U.S." and "e.g." end no sentence; a list item's sentences count one by one.
    answer = f"The U.S. office pays, e.g. for visas. [{A}]\n- It pays once. It pays late. [{B}]"
    assert m.answer_length(answer) == (3, 15)


def test_retrieval_recall_at_k() -> None:
    retrieved = [A, B, C]
    assert m.retrieval_hit(retrieved, {B}, 1) is False
    assert m.retrieval_hit(retrieved, {B}, 3) is True
    assert m.retrieval_hit(retrieved, {"https://kb.example/z"}, None) is False


def test_alignment_action_and_filtering_counts() -> None:
    docs = {A: "the quick brown fox jumps over the lazy dog near the river bank today"}
    alignment = [
        {"action": "kept", "url": A, "overlap": 1.0, "quote": "the quick brown fox jumps over the lazy dog"},
        {"action": "truncated", "url": A, "overlap": 0.4, "quote": "the lazy dog near the river"},
        {"action": "corrected", "url": A, "overlap": 0.6, "quote": "fox jumps over the lazy dog near the river"},
        {"action": "dropped", "url": A, "overlap": 0.0, "quote": ""},
    ]
    assert m.action_counts(alignment) == {"kept": 1, "truncated": 1, "relinked": 0, "corrected": 1, "dropped": 1}
    counts = m.filtering_counts(alignment, docs, 5, 0.7)
    # Before filtering 3 passages are below 0.7 (0.4, 0.6, 0.0); the 3 retained quotes are source
    # text, so none is below after. 10-grams: 0 + 0 + 0 for the first two (9 and 6 words:
    # the first has 9 words -> 0 ten-grams), the third has 9 words -> 0; so Cov@10 counts nothing.
    assert counts == {"passages": 4, "retained": 3, "pre_below": 3, "post_below": 0, "cov10_hits": 0, "cov10_total": 0}
    long = [{"action": "kept", "url": A, "overlap": 1.0,
             "quote": "the quick brown fox jumps over the lazy dog near the river"}]  # 12 words: 3 ten-grams
    assert m.filtering_counts(long, docs, 5, 0.7)["cov10_hits"] == 3
    assert m.filtering_counts(long, docs, 5, 0.7)["cov10_total"] == 3
    invented = [{"action": "kept", "url": A, "overlap": 1.0, "quote": "purple elephants dance quietly on the moon"}]
    assert m.filtering_counts(invented, docs, 5, 0.7)["post_below"] == 1


def test_numbered_citations_resolve_through_the_reference_list() -> None:
    answer = (
        "Reports are due in 30 days. [1]\n"
        "Receipts must be attached. [1], [2].\n"
        "References:\n[1] https://kb.example/a\n[2] https://invented.example/x\n"
    )
    body, refs = split_references(answer)
    assert refs == {1: A, 2: "https://invented.example/x"}
    assert "References" not in body
    facts = numbered_facts(answer, [B, C])
    assert [(f.sentence, f.url) for f in facts] == [
        ("Reports are due in 30 days.", A),
        ("Receipts must be attached.", A),
        ("Receipts must be attached.", "https://invented.example/x"),
    ]
    # Without a reference list a number means the prompt's numbered document; an impossible one stays.
    facts = numbered_facts("It is allowed. [2] It is not. [7]", [A, B])
    assert [(f.sentence, f.url) for f in facts] == [("It is allowed.", B), ("It is not.", "[7]")]
    # EvidenT's own [url] citations are read the same way.
    assert [f.url for f in numbered_facts(f"Due in 30 days. [{A}][{B}]", [])] == [A, B]


def test_abstention_text() -> None:
    assert is_abstention("Not sufficient information to answer.")
    assert is_abstention("  not sufficient information to answer ")
    assert not is_abstention("There is not sufficient detail here, but the deadline is 30 days.")


def _row(qid: str, answerable: bool, cited: list[str], outcome: str = "answered",
         evidence: str = "", retrieved: tuple[str, ...] = (A, B)) -> Row:
    q = EvalQuery(id=qid, query="q?", answerable=answerable, gold_urls=[B] if answerable else [],
                  gold_evidence=["due in 30 days"] if answerable else [])
    rec = MethodRecord(key=qid, query_id=qid, method="x", outcome=outcome,  # type: ignore[arg-type]
                       facts=[CitedFact(sentence=evidence or "text", url=u, quote=evidence) for u in cited])
    ret = RetrievalRecord(key=qid, query_id=qid, urls=list(retrieved), hashes=[])
    return Row(query=q, retrieval=ret, record=rec, documents={A: "text a", B: "text b"})


def test_method_metrics_denominators() -> None:
    rows = [
        _row("1", True, [B], evidence="Reports are due in 30 days."),  # grounded, first gold, evidence
        _row("2", True, [A, B]),  # grounded, first not gold, 1 of 2 cited gold
        _row("3", True, [], outcome="insufficient"),  # false abstention
        _row("4", False, [], outcome="insufficient"),  # correct abstention
        _row("5", False, ["https://invented.example/x"]),  # hallucination
        _row("6", True, [B], outcome="error"),  # left out of every denominator
    ]
    out = method_metrics(rows, 5, 0.7)
    assert (out["errors"].hits, out["errors"].n) == (1, 6)
    assert (out["hallucination"].hits, out["hallucination"].n) == (1, 5)
    assert (out["groundedness"].hits, out["groundedness"].n) == (2, 3)
    assert (out["first_citation_precision"].hits, out["first_citation_precision"].n) == (1, 2)
    assert (out["cited_url_precision"].hits, out["cited_url_precision"].n) == (2, 3)
    assert (out["evidence_recall"].hits, out["evidence_recall"].n) == (1, 3)
    assert (out["false_abstention"].hits, out["false_abstention"].n) == (1, 3)
    assert (out["correct_abstention"].hits, out["correct_abstention"].n) == (1, 2)
    # Retrieval does not depend on the method's answer: every answerable question counts, errors too.
    assert (out["retrieval_recall_at_1"].hits, out["retrieval_recall_at_1"].n) == (0, 4)
    assert (out["retrieval_recall_at_3"].hits, out["retrieval_recall_at_3"].n) == (4, 4)
    assert out["answer_sentences"].n == 3  # answered, not abstained, not failed
    # Gold (B) was retrieved for every question: the conditional rates equal the plain ones here.
    assert (out["groundedness_when_retrieved"].hits, out["groundedness_when_retrieved"].n) == (2, 3)


def test_answer_failures_are_told_apart_from_retrieval_failures() -> None:
    rows = [_row("1", True, [B]), _row("2", True, [A], retrieved=(A,)), _row("3", True, [A])]
    out = method_metrics(rows, 5, 0.7)
    assert (out["groundedness"].hits, out["groundedness"].n) == (1, 3)
    # Question 2 never had its gold page: only 1 and 3 count, and 3 is the answer's failure.
    assert (out["groundedness_when_retrieved"].hits, out["groundedness_when_retrieved"].n) == (1, 2)


def test_compare_tests_shared_rates_only() -> None:
    ours = method_metrics([_row("1", True, [B]), _row("2", True, [A])], 5, 0.7)
    theirs = method_metrics([_row("1", True, [A]), _row("2", True, [A])], 5, 0.7)
    tests = compare({"evident": ours, "bm25": theirs})
    by_metric = {t.metric: t for t in tests}
    assert "retrieval_recall_at_1" not in by_metric and "answer_words" not in by_metric
    assert by_metric["groundedness"].baseline == "bm25" and by_metric["groundedness"].z > 0


def test_judge_labels() -> None:
    from evident.eval.judge import parse_label

    assert parse_label('{"label": "Yes", "reason": "r", "confidence_score": 0.9}') == "Yes"
    assert parse_label('Here you go: {"label": "partial", "reason": "r"} done') == "Partial"
    assert parse_label('{"label": "No"}') == "No"
    assert parse_label('{"label": "Maybe"}') == "invalid"
    assert parse_label("no JSON at all") == "invalid"


def test_an_uncited_answer_is_answered_not_an_abstention() -> None:
    from evident.eval.methods import answer_outcome

    assert answer_outcome("Reports are due within 30 days.") == "answered"
    assert answer_outcome("Not sufficient information to answer.") == "insufficient"
    assert answer_outcome("   ") == "insufficient"
