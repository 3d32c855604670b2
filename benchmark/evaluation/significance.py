"""Significance of a difference between two systems: a paired t-test over per-query scores (one
training seed) or over seed-level scores (several), with Holm's step-down correction over the family
a table tests (every arm against its baseline, on every dataset).

Why paired over queries: both systems answer the same queries, so the test is on the per-query
differences (``scipy.stats.ttest_rel``, two-sided), as in the TREC and BEIR literature. That test
treats the queries as the only source of variance; it says nothing about another training run.

Why over seeds when there are several: the claim a rescale makes is about training, and its unit of
replication is the training run (the seed). Averaging per-query scores over seeds first hides the
seed-to-seed variance, so a per-query test on those averages is anti-conservative. The seed-level
test takes each seed's score (the measure's mean over the queries) as one observation and pairs the
two arms by seed: the same seed gives both arms the same data order and held-out queries, so the
pairing removes what they share. With k seeds it has k − 1 degrees of freedom, so it is weak with
three seeds; that is the evidence there is.

Why Holm: a table makes one comparison per arm and dataset, and Holm controls the family-wise error
rate over all of them without Bonferroni's loss of power.
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
    queries: int  # the paired units: queries, or seeds for ``seed_ttest``
    mean_difference: float
    unit: str = "queries"


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


def seed_ttest(a: Mapping[int, float], b: Mapping[int, float]) -> TTest:
    """Two-sided paired t-test of seed-level scores ``a`` against ``b`` (seed → that seed's score),
    paired by seed; only seeds scored on both sides count. Undefined cases as ``paired_ttest``."""
    test = paired_ttest({str(s): v for s, v in a.items()}, {str(s): v for s, v in b.items()})
    return TTest(test.statistic, test.p_value, test.queries, test.mean_difference, "seeds")


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
