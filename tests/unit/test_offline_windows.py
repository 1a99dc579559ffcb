"""Offline extractor: how far a window's quote reaches (rules 37 and 38 of docs/evaluation.md)."""

from __future__ import annotations

import pytest

from evident.alignment.models import SourceDocument
from evident.offline import extractor
from evident.offline.extractor import extract_passages
from evident.offline.units import analyse

DEFERMENT = SourceDocument(url="KB-5", title="Deferment", content=(
    "Student loan deferment lets you pause payments. You must apply through your servicer. "
    "A decision takes about a month. However, interest may still accrue during the pause. "
    "The office is closed on Sundays.\n\nDeferment requests are reviewed monthly."))

COMPLAINTS = SourceDocument(url="KB-6", title="Contact us", content=(
    "Opening hours\n\nOur phone lines open at 8:00 on weekdays. Letters are answered in a week.\n\n"
    "Feedback\n\nWe read every complaint about our service. You can submit a complaint online at any "
    "time of day, or send it by mail. We answer within ten days."))
COMPLAINT_QUERY = "How do I submit a complaint about the service online?"


def test_a_window_reads_on_into_a_sentence_that_takes_it_up() -> None:
    # Rule 37: past its three units the window still quotes "However, ...", which qualifies what it
    # says; the sentence after that, a new thought, stays out, and so does the next paragraph.
    passages = extract_passages("How does student loan deferment work?", [DEFERMENT])
    assert passages[0].content == (
        "Student loan deferment lets you pause payments. You must apply through your servicer. "
        "A decision takes about a month. However, interest may still accrue during the pause."
    )


def test_without_continuation_words_the_window_stops_at_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractor, "CONTINUATIONS", frozenset())
    passages = extract_passages("How does student loan deferment work?", [DEFERMENT])
    assert passages[0].content.endswith("A decision takes about a month.")


def test_what_a_window_reads_on_into_does_not_score() -> None:
    # The sentence read on to is quoted, not scored: the window's score is that of its own units.
    scorer, units, windows = extractor._windows("How does student loan deferment work?", [DEFERMENT])
    best = windows[0]
    assert (best.first, best.last, best.end) == (0, 2, 3)
    alone = extractor._window(scorer, units[0], 0, best.first, best.last, 0)
    assert alone is not None and alone.score == best.score


def test_a_chosen_opening_joins_the_passage_it_introduces() -> None:
    # Rule 38: the paragraph's opening, chosen as a lower-ranked window, is quoted in front of the
    # better window right after it, at that window's rank, in the page's order.
    passages = extract_passages(COMPLAINT_QUERY, [COMPLAINTS])
    assert [p.content for p in passages] == [
        "We read every complaint about our service. You can submit a complaint online at any time of day, "
        "or send it by mail. We answer within ten days."
    ]


def test_without_joining_the_opening_comes_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractor, "_joined", lambda chosen, units: chosen)
    passages = extract_passages(COMPLAINT_QUERY, [COMPLAINTS])
    assert [p.content for p in passages] == [
        "You can submit a complaint online at any time of day, or send it by mail. We answer within ten days.",
        "We read every complaint about our service.",
    ]


def test_only_an_opening_in_the_same_paragraph_right_before_is_joined() -> None:
    units = [analyse(COMPLAINTS.content).units]
    # units: 0 heading, 1-2 first paragraph, 3 heading, 4-6 second paragraph
    assert extractor._joined([(0, 5, 6), (0, 4, 4)], units) == [(0, 4, 6)]
    # Text after the better window stays a passage of its own.
    assert extractor._joined([(0, 4, 4), (0, 5, 6)], units) == [(0, 4, 4), (0, 5, 6)]
    # Not across a heading or a paragraph break, nor over a gap, nor across documents.
    assert extractor._joined([(0, 4, 6), (0, 1, 2)], units) == [(0, 4, 6), (0, 1, 2)]
    assert extractor._joined([(0, 4, 6), (0, 3, 3)], units) == [(0, 4, 6), (0, 3, 3)]
    assert extractor._joined([(0, 6, 6), (0, 4, 4)], units) == [(0, 6, 6), (0, 4, 4)]
    assert extractor._joined([(0, 5, 6), (1, 4, 4)], units + units) == [(0, 5, 6), (1, 4, 4)]
