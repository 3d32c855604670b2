"""Outcomes that need other runs: a trained run judged against the same backbone's baseline arm and
against the BERT reference, from what the results record (no model is loaded).

The paper's degradation is a backbone that trains worse than BERT-SPLADE under the same recipe, not
a run that ends below its own untrained start (the train stage's ``degraded``, which sees one run
only). Both judgements read the **published** checkpoint, the model that is encoded and scored.

* ``degraded`` against a comparator (the baseline arm of the same backbone; the reference's baseline
  arm): the run's per-query RR@10 on the held-out dev queries (``dev_rr_published`` in its train
  record) is below the comparator's, by a two-sided paired t-test over the dev queries both share
  (same triples, so the same dev batch, paired by query key), at the table's α, same seed. Each
  judgement labels one run, like the train stage's outcome, so it is not corrected for multiplicity.
  Under ``checkpoint = "best"`` the published checkpoint was chosen on these dev queries: its dev RR
  is optimistic, for every arm alike (each the best of the same number of evaluations).
* ``dense`` against the reference: the run's query or document non-zeros (as indexed, per dataset)
  above √ρ_ref · |V|, where ρ_ref is the reference's density (non-zeros / its vocabulary) on the same
  dataset and seed. √ρ_ref is the geometric mean of the reference's density and a fully dense vector
  (ρ = 1): a run above it is closer to dense than to the reference on the log scale that sparsity and
  FLOPS are compared on. No constant is chosen: the threshold follows from the reference under the
  same recipe (bert-base-uncased at 0.5 % density gives 7 %, against the train stage's fixed 50 %).

The reference is the table setting ``reference`` (a backbone name), else the suite's first backbone
whose name starts with ``bert``; a suite without one is not judged against a reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.report.labels import baseline_of, is_baseline, system_label, trained_here
from benchmark.report.results import DEV_MEASURE, ConditionResult, RowKey, SuiteResults
from benchmark.training.outcomes import DEGRADED

DENSE = "dense"
BASELINE_ARM = "baseline"
REFERENCE = "reference"
BOTH = "baseline = reference"
REFERENCE_PREFIX = "bert"


@dataclass(frozen=True)
class Judgement:
    row: RowKey
    seed: int | None
    kind: str  # DEGRADED | DENSE
    against: str  # BASELINE_ARM | REFERENCE | BOTH
    reference: str  # the compared row's label
    verdict: bool | None  # None: not judged (``detail`` says why)
    rule: str
    statistic: float | None = None  # degraded: t; dense: the run's density / the threshold density
    p_value: float | None = None
    queries: int | None = None
    dataset: str = ""  # dense: the corpus whose non-zeros are judged
    detail: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} vs {self.against}"


def reference_row(results: SuiteResults, rows: Mapping[RowKey, Any]) -> RowKey | None:
    """The BERT reference: the trained baseline arm of the table's ``reference`` backbone, else of
    the first backbone named ``bert…``."""
    wanted = results.settings().reference
    backbones = list(dict.fromkeys(k[1] for k in rows if trained_here(k)))
    name = wanted or next((b for b in backbones if b.lower().startswith(REFERENCE_PREFIX)), None)
    return next((k for k in rows if trained_here(k) and k[1] == name and is_baseline(k[2])), None)


def _by_seed(runs: list[ConditionResult]) -> dict[Any, ConditionResult]:
    out: dict[Any, ConditionResult] = {}
    for c in runs:
        out.setdefault(c.seed, c)
    return out


def _dev(results: SuiteResults, c: ConditionResult | None) -> dict[str, float] | None:
    if c is None or not c.train_id:
        return None
    return results.perquery.get(c.train_id, {}).get(DEV_MEASURE)


def degraded(
    results: SuiteResults,
    row: RowKey,
    seed: Any,
    run: ConditionResult,
    other: ConditionResult | None,
    against: str,
    label: str,
    alpha: float,
) -> Judgement:
    from benchmark.evaluation.significance import paired_ttest

    rule = (
        f"published checkpoint's held-out dev RR@10 below {label}'s: two-sided paired t-test over the shared dev "
        f"queries, same seed, p < α = {alpha:g}"
    )
    if other is None:
        return Judgement(
            row, seed, DEGRADED, against, label, None, rule, detail=f"not judged: {label} has no run with seed {seed}"
        )
    mine, theirs = _dev(results, run), _dev(results, other)
    if mine is None or theirs is None:
        who = "this run" if mine is None else label
        return Judgement(
            row,
            seed,
            DEGRADED,
            against,
            label,
            None,
            rule,
            detail=f"not judged: no per-query dev values recorded for {who} (train records before train VERSION 3)",
        )
    test = paired_ttest(mine, theirs)
    if test.queries < 2:
        return Judgement(
            row,
            seed,
            DEGRADED,
            against,
            label,
            None,
            rule,
            queries=test.queries,
            detail=f"not judged: {test.queries} dev queries shared with {label} (different triples?)",
        )
    a, b = (sum(v[q] for q in set(mine) & set(theirs)) / test.queries for v in (mine, theirs))
    verdict = test.mean_difference < 0 and test.p_value < alpha
    detail = (
        f"dev MRR@10 {a:.4f} vs {b:.4f} ({test.mean_difference:+.4f}), t = {test.statistic:.3f}, "
        f"p = {test.p_value:.3g} over {test.queries} dev queries"
    )
    return Judgement(
        row, seed, DEGRADED, against, label, verdict, rule, test.statistic, test.p_value, test.queries, detail=detail
    )


def dense_threshold(reference_nnz: float, reference_vocab: int, vocab: int) -> float:
    """Non-zeros above which a vector is dense: √ρ_ref · |V|, with ρ_ref = reference_nnz / its vocabulary."""
    return math.sqrt(reference_nnz / reference_vocab) * vocab


def dense(row: RowKey, seed: Any, run: ConditionResult, ref: ConditionResult | None, label: str) -> Judgement:
    rule = (
        f"query or document non-zeros above √ρ_ref · |V| (ρ_ref: {label}'s density on the same dataset and seed; "
        "the geometric mean of its density and a dense vector)"
    )
    sides = [
        ("query", run.query_nnz, ref.query_nnz if ref else None),
        ("document", run.doc_nnz, ref.doc_nnz if ref else None),
    ]
    if (
        ref is None
        or run.vocab_size is None
        or ref.vocab_size is None
        or any(n is None or r is None for _, n, r in sides)
    ):
        missing = "the reference's run" if ref is None else "the vocabulary size or the non-zeros"
        return Judgement(
            row,
            seed,
            DENSE,
            REFERENCE,
            label,
            None,
            rule,
            dataset=run.dataset,
            detail=f"not judged: {missing} not recorded",
        )
    parts, worst = [], 0.0
    for side, nnz, ref_nnz in sides:
        if ref_nnz <= 0:  # type: ignore[operator]
            return Judgement(
                row,
                seed,
                DENSE,
                REFERENCE,
                label,
                None,
                rule,
                dataset=run.dataset,
                detail=f"not judged: the reference indexes no {side} terms",
            )
        limit = dense_threshold(ref_nnz, ref.vocab_size, run.vocab_size)  # type: ignore[arg-type]
        worst = max(worst, nnz / limit)  # type: ignore[operator]
        parts.append(f"{side} {nnz:.1f} vs threshold {limit:.1f} (reference {ref_nnz:.1f} of {ref.vocab_size})")
    return Judgement(
        row,
        seed,
        DENSE,
        REFERENCE,
        label,
        worst > 1,
        rule,
        statistic=worst,
        dataset=run.dataset,
        detail=f"{'; '.join(parts)} in a vocabulary of {run.vocab_size}",
    )


def judge(results: SuiteResults, rows: Mapping[RowKey, Any]) -> dict[RowKey, list[Judgement]]:
    """Every trained SPLADE row's judgements, per seed (and per dataset for ``dense``)."""
    alpha = results.settings().alpha
    ref = reference_row(results, rows)
    out: dict[RowKey, list[Judgement]] = {}
    for key, row in rows.items():
        if not trained_here(key):
            continue
        found: list[Judgement] = []
        base = baseline_of(key, rows)
        comparators = [
            (against, other)
            for against, other in ((BASELINE_ARM, base), (REFERENCE, ref))
            if other is not None and other != key
        ]
        if len(comparators) == 2 and comparators[0][1] == comparators[1][1]:
            comparators = [(BOTH, base)]
        mine = _by_seed(row.runs)
        for against, other in comparators:
            theirs = _by_seed(rows[other].runs)
            for seed, run in mine.items():
                if run.stopped_early:
                    continue  # no published model to judge
                found.append(degraded(results, key, seed, run, theirs.get(seed), against, system_label(*other), alpha))
        if ref is not None and ref != key:
            ref_runs = {(c.seed, c.dataset): c for c in rows[ref].runs if c.scored}
            for c in row.runs:
                if c.scored:
                    found.append(dense(key, c.seed, c, ref_runs.get((c.seed, c.dataset)), system_label(*ref)))
        out[key] = found
    return out


def marks(judgements: list[Judgement], seeds: int) -> list[str]:
    """ "degraded vs reference" (one seed) or "2/3 degraded vs reference"; a run dense on any dataset counts once."""
    out = []
    for label in dict.fromkeys(j.label for j in judgements):
        hit = {j.seed for j in judgements if j.label == label and j.verdict}
        if hit:
            out.append(label if seeds == 1 else f"{len(hit)}/{seeds} {label}")
    return out


JUDGEMENT_COLUMNS = [
    "row",
    "seed",
    "dataset",
    "kind",
    "against",
    "reference",
    "verdict",
    "statistic",
    "p_value",
    "queries",
    "rule",
    "detail",
]


def judgement_rows(judged: Mapping[RowKey, list[Judgement]]) -> list[dict[str, Any]]:
    """``judgements.csv``: every judgement, its rule, reference, statistic and p-value."""
    return [
        {
            "row": system_label(*j.row),
            "seed": "" if j.seed is None else j.seed,
            "dataset": j.dataset,
            "kind": j.kind,
            "against": j.against,
            "reference": j.reference,
            "verdict": "" if j.verdict is None else j.verdict,
            "statistic": "" if j.statistic is None else f"{j.statistic:.6g}",
            "p_value": "" if j.p_value is None else f"{j.p_value:.6g}",
            "queries": "" if j.queries is None else j.queries,
            "rule": j.rule,
            "detail": j.detail,
        }
        for js in judged.values()
        for j in js
    ]
