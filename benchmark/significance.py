"""Significance of a difference between two systems: a paired t-test over per-query scores, with
Holm's step-down correction over the datasets a table compares on.

Why paired: both systems answer the same queries, so the test is on the per-query differences
(``scipy.stats.ttest_rel``, two-sided), as in the TREC and BEIR literature. Why Holm: a row of a
table makes one comparison per dataset, and Holm controls the family-wise error rate over them
without Bonferroni's loss of power.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TTest:
    """A paired t-test of ``a - b`` over the queries both systems were scored on."""

    statistic: float
    p_value: float  # two-sided; 1.0 when the test is undefined (fewer than 2 queries, no variance)
    queries: int
    mean_difference: float


def paired_ttest(a: Mapping[str, float], b: Mapping[str, float]) -> TTest:
    """Two-sided paired t-test of per-query scores ``a`` against ``b`` (query id → value).

    Only queries scored for both count. Identical scores on every query (no variance of the
    differences) give p = 1: there is no evidence of a difference, and NaN would poison Holm.
    """
    queries = sorted(set(a) & set(b))
    diffs = [a[q] - b[q] for q in queries]
    mean = sum(diffs) / len(diffs) if diffs else 0.0
    if len(queries) < 2:
        return TTest(math.nan, 1.0, len(queries), mean)
    import warnings

    from scipy.stats import ttest_rel

    with warnings.catch_warnings():  # near-identical scores: scipy warns of precision loss; p is still right
        warnings.simplefilter("ignore", RuntimeWarning)
        result = ttest_rel([a[q] for q in queries], [b[q] for q in queries])
    statistic, p = float(result.statistic), float(result.pvalue)
    if math.isnan(p):  # zero variance of the differences: all equal (p = 1) ...
        return TTest(statistic, 1.0, len(queries), mean)
    return TTest(statistic, p, len(queries), mean)  # ... or a constant non-zero shift (p = 0, t = ±inf)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    With p sorted ascending as p_(1) ≤ … ≤ p_(m): adj_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)).
    Rejecting where adj ≤ α is Holm's step-down procedure at family-wise level α.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
