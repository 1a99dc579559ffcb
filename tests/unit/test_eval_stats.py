"""The statistics of `evident eval` against published and hand-computed values."""

from __future__ import annotations

import math

import pytest

from evident.eval.stats import mean, quantile, rate, two_proportion_z


@pytest.mark.parametrize(
    ("hits", "n", "low", "high"),
    [
        # Newcombe (1998), Stat. Med. 17:857, Table I, method 3 (Wilson score interval).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombe(hits: int, n: int, low: float, high: float) -> None:
    est = rate(hits, n)
    assert est.value == pytest.approx(hits / n)
    assert est.ci_low == pytest.approx(low, abs=5e-5)
    assert est.ci_high == pytest.approx(high, abs=5e-5)
    assert est.n == n and est.hits == hits


def test_wilson_interval_by_its_formula() -> None:
    hits, n, z = 7, 40, 1.959963984540054
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    est = rate(hits, n)
    assert (est.ci_low, est.ci_high) == (pytest.approx(centre - half), pytest.approx(centre + half))


def test_empty_sample_has_no_value() -> None:
    est = rate(0, 0)
    assert est.value is None and est.ci_low is None and est.n == 0


def test_two_proportion_z_test_textbook() -> None:
    # 50/100 vs 40/100: pooled p = 0.45, SE = sqrt(0.45 * 0.55 * (1/100 + 1/100)) = 0.070356
    z, p = two_proportion_z(50, 100, 40, 100)  # type: ignore[misc]
    assert z == pytest.approx(0.10 / 0.0703562, rel=1e-5)
    assert z == pytest.approx(1.4213, abs=1e-4)
    assert p == pytest.approx(0.15522, abs=1e-4)
    # The sign follows the first sample.
    z2, p2 = two_proportion_z(40, 100, 50, 100)  # type: ignore[misc]
    assert z2 == pytest.approx(-z) and p2 == pytest.approx(p)


def test_z_test_on_identical_extremes_is_no_difference() -> None:
    assert two_proportion_z(0, 50, 0, 80) == (0.0, 1.0)
    assert two_proportion_z(30, 30, 12, 12) == (0.0, 1.0)
    assert two_proportion_z(3, 10, 0, 0) is None


def test_mean_with_student_t_interval() -> None:
    # mean 3, s = sqrt(2.5), SE = s/sqrt(5) = 0.70711, t(0.975, 4) = 2.776445
    est = mean([1.0, 2.0, 3.0, 4.0, 5.0])
    assert est.value == pytest.approx(3.0)
    assert est.ci_low == pytest.approx(3 - 2.776445 * 0.7071068, abs=1e-5)
    assert est.ci_high == pytest.approx(3 + 2.776445 * 0.7071068, abs=1e-5)
    assert mean([2.0]).ci_low is None
    assert mean([]).value is None


def test_median_with_order_statistic_interval() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    est = quantile(values, 0.5)
    assert est.value == pytest.approx(10.5)
    # Binomial(20, 0.5): P(X <= 5) = 0.0207 <= 0.025 < P(X <= 6), so the 95% interval is the
    # 6th..15th order statistics.
    assert (est.ci_low, est.ci_high) == (6.0, 15.0)
    assert quantile(values, 0.95).value == pytest.approx(19.05)
