"""The exact ranking's pool (`visible_ranking._Found`), kept as candidates are added, is its definition's."""

from __future__ import annotations

import math
import random

import pytest

from evident.connectors.index.visible_ranking import CandidatePool, RankedCandidate, TermStats


def _candidate(url: str, high: float) -> RankedCandidate:
    return RankedCandidate(url, TermStats({}, 1.0, 1, 1.0), low=high / 2, high=high)


@pytest.mark.parametrize("seed", range(20))
def test_the_kept_pool_is_every_candidate_whose_bound_reaches_the_floor(seed: int) -> None:
    rng = random.Random(seed)
    pool = rng.choice([1, 3, 8, 20])
    found = CandidatePool(k=min(pool, 8), pool=pool)
    for i in range(rng.randrange(1, 200)):
        # Ties at the floor (few distinct bounds) and bounds in no order, as near-duplicates give.
        found.add((0, i), _candidate(f"u{i}", float(rng.randrange(12)) if rng.random() < 0.5 else rng.random() * 12))
        floor = found.floor()
        expected = [c for c in found.candidates.values() if c.bound >= floor]
        assert found.pooled() == expected
        assert floor == (-math.inf if len(found.candidates) < pool
                         else sorted((c.bound for c in found.candidates.values()), reverse=True)[pool - 1])
