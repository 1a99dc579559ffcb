"""The offline engine's answerability gate (`evident.offline.answerability`) on a handwritten page.

The cosines are all-MiniLM-L6-v2's for these sentences and messages (the local model's, rounded), handed
in as a retrieval by meaning attaches them (`SEMANTIC_WINDOWS`). What is pinned: sentences about the
asker's situation before the question lower its cosine but not its coverage, and do not flip an
answerable question to a refusal; a question put in other words than the page's is answered by meaning where the
words alone refuse it; meaning alone (no word shared with the question) never passes; a question the page is
related to but does not answer is refused, by meaning and by words alike; evidence the gate admits by
a narrow margin is weak.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from evident.alignment.models import SourceDocument
from evident.embeddings.meaning import SEMANTIC_WINDOWS
from evident.offline.answerability import ALWAYS, DEFAULT_GATE, AnswerGate, Evidence, answerability
from evident.offline.extractor import extract_evidence, extract_passages, window_evidence

ANNUAL = "Employees get 25 days of annual leave per year."
EXPIRY = "Unused days expire on 31 March of the next year."
SICK = "Sick leave is paid from the first day with a doctor's note."
TRAVEL = "Travel is booked through the travel desk."
PETS = "Staff may bring a dog to the office on Fridays."
SENTENCES = (ANNUAL, EXPIRY, SICK, TRAVEL, PETS)
CONTENT = f"# Time off\n\n{ANNUAL} {EXPIRY}\n\n## Sick leave\n\n{SICK}\n\n## Travel\n\n{TRAVEL}\n\n## Pets\n\n{PETS}\n"

QUESTION = "How many days of annual leave do I get?"
# Only "days" of it is on the page: "vacation" and "company" are the page's "annual leave" and "Employees".
# (Not "How many ...": a number beside "days" would answer that by words, `terms.QUANTITY`.)
PARAPHRASE = "What vacation days does the company give?"
ONE_SCENARIO = "We are moving house next month with our two cats and a piano. "
TWO_SCENARIOS = ONE_SCENARIO + "My partner starts a new job in Porto and our daughter changes school. "
# Cosines of (ANNUAL, EXPIRY, SICK, TRAVEL, PETS) to each message.
COSINES = {
    QUESTION: (0.764, 0.441, 0.472, 0.081, 0.219),
    ONE_SCENARIO + QUESTION: (0.542, 0.321, 0.345, 0.143, 0.327),
    TWO_SCENARIOS + QUESTION: (0.556, 0.280, 0.333, 0.148, 0.291),
    "How many weeks of paternity leave do fathers get?": (0.369, 0.236, 0.259, -0.015, 0.113),
    PARAPHRASE: (0.582, 0.525, 0.422, 0.289, 0.377),
}


def _page(cosines: tuple[float, ...] | None = None) -> SourceDocument:
    metadata = {}
    if cosines is not None:
        spans = [(CONTENT.index(s), CONTENT.index(s) + len(s)) for s in SENTENCES]
        metadata = {SEMANTIC_WINDOWS: [[s, e, c] for (s, e), c in zip(spans, cosines, strict=True)]}
    return SourceDocument(url="hr/handbook.md", title="Handbook", content=CONTENT, metadata=metadata)


@pytest.mark.parametrize("message", [QUESTION, ONE_SCENARIO + QUESTION, TWO_SCENARIOS + QUESTION])
def test_scenario_sentences_do_not_flip_an_answerable_question(message: str) -> None:
    page = _page(COSINES[message])
    for by_meaning in (True, False):
        passages = extract_passages(message, [page] if by_meaning else [_page()], semantic_weight=0.4 * by_meaning)
        assert passages and passages[0].content.startswith(ANNUAL), (message, by_meaning)
    # The scenario lowers the cosine; the coverage reads the asking part's weight and stays whole.
    best = window_evidence(message, [page], 0.4)[0]
    assert best.coverage == pytest.approx(1.0)
    assert answerability(best, DEFAULT_GATE.meaning_weight) >= DEFAULT_GATE.gate


def test_meaning_alone_does_not_pass() -> None:
    # No word of the question is on the page, yet every sentence "means" it.
    page = _page((0.9,) * len(SENTENCES))
    message = "What is the holiday allowance?"
    assert all(e.coverage == 0.0 for e in window_evidence(message, [page], 0.4))
    assert extract_passages(message, [page], semantic_weight=0.4) == []
    assert extract_passages(message, [page], semantic_weight=1.0) == []
    # Blended as it is, such a cosine would pass: a window sharing no word scores 0.
    assert DEFAULT_GATE.meaning_weight * 0.9 >= DEFAULT_GATE.gate
    assert answerability(Evidence(0.0, 0.9), DEFAULT_GATE.meaning_weight) == 0.0
    assert answerability(Evidence(0.5, 0.9), DEFAULT_GATE.meaning_weight) == pytest.approx(0.3 * 0.5 + 0.7 * 0.9)


def test_a_question_in_other_words_is_answered_by_meaning() -> None:
    page = _page(COSINES[PARAPHRASE])
    best = window_evidence(PARAPHRASE, [page], 0.4)[0]
    # The words alone cover too little of it to answer ...
    assert best.coverage < DEFAULT_GATE.words_gate
    assert extract_passages(PARAPHRASE, [_page()]) == []
    # ... the cosine says the leave sentence is what is asked.
    assert answerability(best, DEFAULT_GATE.meaning_weight) >= DEFAULT_GATE.gate
    passages = extract_passages(PARAPHRASE, [page], semantic_weight=0.4)
    assert passages and passages[0].content.startswith(ANNUAL)


def test_meaning_lowers_a_window_whose_words_match_but_whose_text_means_something_else() -> None:
    words_match = Evidence(coverage=0.6, cosine=0.1)
    assert AnswerGate(0.7, gate=0.31, words_gate=0.32).admits(Evidence(0.6, None))
    assert not AnswerGate(0.7, gate=0.31, words_gate=0.32).admits(words_match)


def test_an_unanswerable_question_on_a_related_page_is_refused() -> None:
    message = "How many weeks of paternity leave do fathers get?"
    page = _page(COSINES[message])
    evidence = window_evidence(message, [page], 0.4)
    assert evidence and max(answerability(e, DEFAULT_GATE.meaning_weight) for e in evidence) < DEFAULT_GATE.gate
    assert extract_passages(message, [page], semantic_weight=0.4) == []
    assert extract_passages(message, [_page()]) == []  # by words alone too
    # A gate that refuses nothing answers it with the leave sentences: the page is related.
    assert extract_passages(message, [page], semantic_weight=0.4, gate=ALWAYS)


def test_words_alone_read_the_coverage_gate() -> None:
    evidence = Evidence(coverage=0.35, cosine=None)
    gate = AnswerGate(meaning_weight=0.6, gate=0.9, words_gate=0.32)
    assert answerability(evidence, gate.meaning_weight) == 0.35 and gate.admits(evidence)
    assert not AnswerGate(meaning_weight=0.6, gate=0.0, words_gate=0.4).admits(evidence)


def test_a_turn_of_a_conversation_is_gated_by_its_words() -> None:
    # The extract node gates a follow-up by words (evident/nodes/extract.py): the meaning gate is
    # calibrated on first questions, and a follow-up's cosines are lower throughout.
    gate = AnswerGate(meaning_weight=0.7, gate=0.31, words_gate=0.32)
    covered_but_far = Evidence(coverage=0.5, cosine=0.1)
    assert not gate.admits(covered_but_far)
    assert gate.by_words().admits(covered_but_far)
    assert not gate.by_words().admits(Evidence(coverage=0.3, cosine=0.9))


def test_evidence_the_gate_admits_by_a_narrow_margin_is_weak() -> None:
    # The page says when unused days expire, not whether they are paid out: "unused" and "days" are on it,
    # "vacation", "paid out" and "resign" are not. By words, a third of the question: just past the gate.
    message = "Are unused vacation days paid out when I resign?"
    coverage = max(e.coverage for e in window_evidence(message, [_page()]))
    assert DEFAULT_GATE.words_gate <= coverage < DEFAULT_GATE.words_gate + DEFAULT_GATE.hedge_margin
    found = extract_evidence(message, [_page()])
    assert found.passages and EXPIRY in found.passages[0].content
    assert found.weak
    assert found.passages == extract_passages(message, [_page()])
    # No margin, no weak evidence; a question the page answers outright is not weak either.
    assert not extract_evidence(message, [_page()], gate=replace(DEFAULT_GATE, hedge_margin=0.0)).weak
    assert not extract_evidence(QUESTION, [_page()]).weak
    assert not extract_evidence(QUESTION, [_page(COSINES[QUESTION])], semantic_weight=0.4).weak
    # Refused evidence is no evidence: nothing to be weak about.
    refused = extract_evidence("How many weeks of paternity leave do fathers get?", [_page()])
    assert refused.passages == [] and not refused.weak


def test_the_margin_is_read_on_the_threshold_each_window_is_gated_by() -> None:
    gate = AnswerGate(meaning_weight=0.7, gate=0.38, words_gate=0.32, hedge_margin=0.1)
    by_words = Evidence(coverage=0.35, cosine=None)
    assert gate.admits(by_words) and not gate.assures(by_words)
    assert gate.assures(Evidence(coverage=0.43, cosine=None))
    by_meaning = Evidence(coverage=0.5, cosine=0.4)  # answerability 0.43
    assert gate.admits(by_meaning) and not gate.assures(by_meaning)
    assert gate.assures(Evidence(coverage=0.5, cosine=0.5))  # 0.50
    assert gate.by_words().hedge_margin == gate.hedge_margin
    assert ALWAYS.hedge_margin == 0.0 and ALWAYS.assures(Evidence(0.0, None))
