"""Confidence intervals and tests: Wilson intervals for rates, t intervals for means,
order-statistic intervals for latency percentiles, two-proportion z-tests.

The paper (Eq. 4) uses the normal approximation p ± 1.96·sqrt(p(1-p)/n); Wilson's interval is
used instead because it stays inside [0, 1] and is not degenerate at 0% (a 0/200 hallucination
rate still has an upper bound).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

Kind = Literal["rate", "mean", "quantile"]


class Estimate(BaseModel):
    """One metric of one method: its value, 95% interval and sample size (None when n = 0)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    kind: Kind = "rate"
    hits: int | None = None

    def public(self) -> dict[str, float | int | None]:
        """The stable `--json` shape."""
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


class ZTest(BaseModel):
    metric: str
    method: str
    baseline: str
    z: float
    p: float


def _finite(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def rate(hits: int, n: int) -> Estimate:
    """hits/n with its 95% Wilson interval."""
    if n <= 0:
        return Estimate(value=None, ci_low=None, ci_high=None, n=0, kind="rate", hits=0)
    # start-up time: statsmodels (with scipy, ~0.7 s) loads at the first interval, not with the report's modules.
    # It ships no type information (no py.typed, no stubs package).
    from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    p = hits / n
    # At 0/n and n/n the bound equals the estimate; keep rounding from putting it a hair beyond.
    return Estimate(value=p, ci_low=min(float(low), p), ci_high=max(float(high), p), n=n, kind="rate", hits=hits)


def mean(values: Sequence[float], bounds: tuple[float, float] | None = None) -> Estimate:
    """The mean with its 95% Student-t interval (no interval below two values), cut to `bounds` for a
    measure that cannot leave them (a share: a t interval near 1 reaches past it)."""
    n = len(values)
    if n == 0:
        return Estimate(value=None, ci_low=None, ci_high=None, n=0, kind="mean")
    m = math.fsum(values) / n
    if n < 2:
        return Estimate(value=m, ci_low=None, ci_high=None, n=n, kind="mean")
    # start-up time: statsmodels (with scipy, ~0.7 s) loads at the first interval
    from statsmodels.stats.weightstats import DescrStatsW  # type: ignore[import-untyped]  # untyped, as above

    if all(v == values[0] for v in values):
        return Estimate(value=m, ci_low=m, ci_high=m, n=n, kind="mean")
    low, high = DescrStatsW(list(values)).tconfint_mean(alpha=0.05)
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Estimate(value=m, ci_low=_finite(low), ci_high=_finite(high), n=n, kind="mean")


def quantile(values: Sequence[float], p: float) -> Estimate:
    """The p-quantile with its distribution-free 95% interval (order statistics, scipy)."""
    n = len(values)
    if n == 0:
        return Estimate(value=None, ci_low=None, ci_high=None, n=0, kind="quantile")
    # start-up time: scipy (~0.5 s) loads at the first quantile; its types live in the separate scipy-stubs
    # package, which is not a dependency.
    from scipy.stats import quantile_test  # type: ignore[import-untyped]

    value = float(np.quantile(np.asarray(values, dtype=float), p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = quantile_test(np.asarray(values, dtype=float), q=value, p=p).confidence_interval(0.95)
    return Estimate(value=value, ci_low=_finite(ci.low), ci_high=_finite(ci.high), n=n, kind="quantile")


def two_proportion_z(hits_a: int, n_a: int, hits_b: int, n_b: int) -> tuple[float, float] | None:
    """(z, two-sided p) of H0: equal rates, pooled variance; None when a sample is empty.

    When both samples are all 0s or all 1s the rates are equal and there is nothing to test:
    z = 0, p = 1 (the formula would divide by zero).
    """
    if n_a <= 0 or n_b <= 0:
        return None
    pooled = (hits_a + hits_b) / (n_a + n_b)
    if pooled in (0.0, 1.0):
        return 0.0, 1.0
    # start-up time: statsmodels (with scipy, ~0.7 s) loads at the first test
    from statsmodels.stats.proportion import proportions_ztest

    z, p = proportions_ztest([hits_a, hits_b], [n_a, n_b], alternative="two-sided")
    return float(z), float(p)
