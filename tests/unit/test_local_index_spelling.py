"""Misspelled query words: a word no document holds is also searched as the nearest indexed word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evident.connectors.index import ranking
from evident.connectors.index.spelling import (
    REPAIR_LONG_LENGTH,
    REPAIR_MAX_LENGTH,
    REPAIR_MIN_LENGTH,
    REPAIR_WEIGHT,
    REPAIRS_PER_QUERY,
    one_slip,
    repair,
    two_slips,
)
from tests.support.index import build, urls


def test_one_slip_drops_swaps_and_adds_but_never_replaces() -> None:
    slips = one_slip("plann")
    assert {"plan", "palnn", "plannn", "pllann"} <= slips
    assert "plant" not in slips and "plann" not in slips


def test_two_slips_move_a_letter_without_adding_one() -> None:
    slips = two_slips("resitrct")
    assert "restrict" in slips  # the "i" typed two places early
    assert "resitrct" not in slips and "restrick" not in slips
    assert all(set(s) <= set("resitrct") for s in slips)


@pytest.mark.parametrize(("token", "vocabulary", "expected"), [
    ("plann", {"plan": 3, "plane": 9}, "plan"),  # one slip; "plane" is a replaced letter
    ("coivd", {"covid": 2}, "covid"),  # two neighbours swapped
    ("centr", {"center": 4}, "center"),  # a letter left out
    ("resitrct", {"restrict": 1}, "restrict"),  # long enough for two slips
    ("plann", {"pan": 50, "plan": 1, "plans": 2}, "plan"),  # nearest first, however common the farther one
    ("plann", {"plank": 5, "plane": 5}, None),  # only replaced letters
    ("spent", {"spend": 9, "sent": 9}, None),  # a replaced letter, a slip in the first two letters
    ("seven", {"even": 9}, None),
    ("resitrc", {"restric": 1}, None),  # two slips need REPAIR_LONG_LENGTH letters
    ("dogg", {"dog": 9}, None),  # shorter than REPAIR_MIN_LENGTH
])
def test_repair_finds_the_nearest_indexed_term(token: str, vocabulary: dict[str, int], expected: str | None) -> None:
    assert REPAIR_MIN_LENGTH == 5 and REPAIR_LONG_LENGTH == 8
    assert repair(token, lambda term: vocabulary.get(term, 0)) == expected


def test_the_most_common_of_equally_near_terms_wins() -> None:
    assert repair("plann", lambda term: {"plan": 2, "planns": 7}.get(term, 0)) == "planns"
    assert repair("plann", lambda term: {"plan": 7, "planns": 7}.get(term, 0)) == "plan"  # ties by the term


RECORDS = [
    {"url": "a-other", "title": "Retirement age", "text": "The age at which retirement benefits start."},
    {"url": "b-plan", "title": "Plan your retirement", "text": "How to plan for retirement."},
]


def test_a_misspelled_word_is_searched_as_the_indexed_one(tmp_path: Path) -> None:
    with build(tmp_path, RECORDS) as index:
        assert urls(index, "plan for retirement") == ["b-plan", "a-other"]
        assert urls(index, "I need to plann for retirement") == ["b-plan", "a-other"]
        assert urls(index, "plann") == ["b-plan"]
        # A guess counts less than the word written.
        exact = dict((doc.url, score) for doc, score in index.search("plan", 8))["b-plan"]
        guessed = dict((doc.url, score) for doc, score in index.search("plann", 8))["b-plan"]
        assert guessed == pytest.approx(exact * REPAIR_WEIGHT, rel=1e-3)


def test_known_words_short_words_and_greetings_are_not_repaired(tmp_path: Path) -> None:
    records = [*RECORDS, {"url": "c-want", "title": "What we want", "text": "Wants and needs."}]
    with build(tmp_path, records) as index:
        assert urls(index, "plans") == ["b-plan"]  # a known word (stem "plan") searched as itself
        assert urls(index, "pln") == []  # too short to guess
        assert urls(index, "whant") == []  # "what" and "want" are words the query analysis leaves out


def test_words_longer_than_any_real_typo_are_not_repaired() -> None:
    # Two slips' candidates grow with the square of the length: a junk "word" is left alone.
    word = "retirement" * 2 + "x"  # 21 letters, one slip from an indexed 20-letter term
    assert len(word) == REPAIR_MAX_LENGTH + 1
    assert repair(word, lambda term: int(term == word[:-1])) is None
    assert repair(word[1:], lambda term: int(term == word[1:-1])) == word[1:-1]


def test_one_query_repairs_at_most_a_few_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ranking.repair

    def counted(token: str, document_count: Callable[[str], int]) -> str | None:
        calls.append(token)
        return real(token, document_count)

    monkeypatch.setattr(ranking, "repair", counted)
    with build(tmp_path, [{"url": "a", "title": "Retirement", "text": "Apply for retirement benefits."}]) as index:
        junk = " ".join(f"zq{chr(97 + i)}xwvbn" for i in range(REPAIRS_PER_QUERY + 4))
        index.search("retirement " + junk, 8)
    assert len(calls) == REPAIRS_PER_QUERY
