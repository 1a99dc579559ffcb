"""The PostgreSQL source's bounded candidate pool and its cached counts, as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evident.connectors.config import PostgresSettings, parse_settings
from evident.connectors.postgres.search import (
    CANDIDATE_POOL,
    WORK_MEM_MB,
    Lexeme,
    VisibleCounts,
    candidate_words,
    sampled_share,
)


def _word(query: str, holding: int) -> Lexeme:
    return Lexeme(word=query, query=f"'{query}'", weight=1.0, idf=1.0, holding=holding)


def test_the_rarest_words_fill_the_pool_first() -> None:
    words = [_word("leave", 600), _word("parental", 40), _word("weeks", 300), _word("policy", 90)]
    assert [w.word for w in candidate_words(words, 150)] == ["parental", "policy"]
    assert [w.word for w in candidate_words(words, 130)] == ["parental", "policy"]
    assert [w.word for w in candidate_words(words, 129)] == ["parental"]
    # The rarest word always, even past the pool: a search never has no candidates.
    assert [w.word for w in candidate_words(words, 10)] == ["parental"]
    # 0: every word, the exact ranking of every match.
    assert {w.word for w in candidate_words(words, 0)} == {"leave", "parental", "weeks", "policy"}


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=12), st.integers(1, 5000))
def test_the_pool_holds_at_most_its_bound_or_the_rarest_word(counts: list[int], pool: int) -> None:
    words = [_word(f"w{i}", n) for i, n in enumerate(counts)]
    chosen = candidate_words(words, pool)
    assert chosen[0].holding == min(counts)
    assert len(chosen) == 1 or sum(w.holding for w in chosen) <= pool
    left_out = [w for w in words if w not in chosen]
    # Every word left out is at least as common as every word chosen, and one more would pass the bound.
    assert all(w.holding >= max(c.holding for c in chosen) for w in left_out)
    assert not left_out or sum(w.holding for w in chosen) + min(w.holding for w in left_out) > pool
    # Where the bound does not bind, the pool is every match: the ranking is exact.
    if sum(counts) <= pool:
        assert len(chosen) == len(words)


def test_only_a_rarest_word_past_the_pool_is_sampled() -> None:
    words = [_word("leave", 600), _word("parental", 40), _word("weeks", 300)]
    assert sampled_share(candidate_words(words, 400), 400) == 1.0  # parental and weeks fit: every document
    assert sampled_share(candidate_words(words, 0), 0) == 1.0  # 0: every match, never a sample
    assert sampled_share(candidate_words(words, 10), 10) == 10 / 40  # parental alone passes the pool


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=12), st.integers(1, 5000))
def test_a_sample_is_expected_to_hold_the_pool(counts: list[int], pool: int) -> None:
    chosen = candidate_words([_word(f"w{i}", n) for i, n in enumerate(counts)], pool)
    share = sampled_share(chosen, pool)
    assert 0 < share <= 1
    # pool / holding * holding is pool up to rounding ((1/249) * 249 is not 1.0 in floating point).
    assert share == 1 or (len(chosen) == 1 and share * chosen[0].holding == pytest.approx(pool))


def test_counts_are_kept_per_generation_and_token_set() -> None:
    counts = VisibleCounts()
    entry = counts.entry(3, ["group:staff", "public"])
    entry.documents, entry.words["leave"] = 10, ("'leav'", 4)
    assert counts.entry(3, ["public", "group:staff"]) is entry  # the same set in another order
    assert counts.entry(4, ["group:staff", "public"]).documents is None  # a refresh since
    assert counts.entry(3, ["public"]).documents is None  # another caller's documents
    # Tables written before generations were kept: counted every time, never shared.
    assert counts.entry(None, ["public"]) is not counts.entry(None, ["public"])


def test_the_settings_default_to_the_searchs_pool_and_memory() -> None:
    settings = parse_settings({"name": "pg", "type": "postgres", "dsn": "host=x", "paths": ["p"]}, 1)
    assert isinstance(settings, PostgresSettings)
    assert settings.candidate_pool == CANDIDATE_POOL
    assert settings.work_mem_mb == WORK_MEM_MB
