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

* ``lost`` against the baseline arm, from the evaluation itself: on each dataset, the row's headline
  measure below its baseline's by more than ``LOSS_THRESHOLD`` of the baseline's score, and the
  difference significant at the table's α by a two-sided paired t-test, over seeds where both rows
  share two or more (each seed's score one observation), else over the queries of the one seed. Training
  sees its own dev batch only; this is what retrieval lost, so a run whose training was ``ok`` can carry
  it, on a collection training never saw.

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
LOST = "lost"
#: a loss of the headline measure larger than this fraction of the baseline's score is marked in the row
LOSS_THRESHOLD = 0.10
BASELINE_ARM = "baseline"
REFERENCE = "reference"
BOTH = "baseline = reference"
REFERENCE_PREFIX = "bert"


@dataclass(frozen=True)
class Judgement:
    row: RowKey
    seed: int | None
    kind: str  # DEGRADED | DENSE | LOST
    against: str  # BASELINE_ARM | REFERENCE | BOTH
    reference: str  # the compared row's label
    verdict: bool | None  # None: not judged (``detail`` says why)
    rule: str
    # degraded: t; dense: the run's density / the threshold density; lost: the loss / the baseline's score
    statistic: float | None = None
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


def headline_measure(results: SuiteResults, dataset: str) -> str:
    """The measure a dataset's column of the headline table shows (``suite_tables``' rule)."""
    settings = results.settings()
    own = results.measures_of(dataset)
    headline = settings.measure or results.measures[0]
    return settings.measure_for.get(dataset) or (headline if headline in own else own[0])


def lost(
    results: SuiteResults, row: RowKey, runs: list[ConditionResult], base: list[ConditionResult], label: str
) -> list[Judgement]:
    """The row's loss against its baseline on each dataset, from the evaluation (see the module doc)."""
    from benchmark.evaluation.significance import paired_ttest, seed_ttest

    alpha = results.settings().alpha
    out = []
    for dataset in dict.fromkeys(c.dataset for c in runs):
        measure = headline_measure(results, dataset)
        rule = (
            f"{measure} below {label}'s by more than {100 * LOSS_THRESHOLD:g} % of its score, and a two-sided "
            f"paired t-test p < α = {alpha:g} (over seeds where several, else over queries)"
        )

        def scores(cs: list[ConditionResult], d: str = dataset, m: str = measure) -> dict[Any, ConditionResult]:
            return {c.seed: c for c in cs if c.dataset == d and c.scored and c.metrics.get(m) is not None}

        mine, theirs = scores(runs), scores(base)
        seeds = [s for s in mine if s in theirs]
        if len(seeds) >= 2:
            a = {s: mine[s].metrics[measure] for s in seeds}
            b = {s: theirs[s].metrics[measure] for s in seeds}
            test, seed, unit = seed_ttest(a, b), None, "seeds"
        elif seeds:
            seed = seeds[0]
            a = results.perquery.get(mine[seed].key, {}).get(measure) or {}
            b = results.perquery.get(theirs[seed].key, {}).get(measure) or {}
            test, unit = paired_ttest(a, b), "queries"
        else:
            out.append(
                Judgement(
                    row,
                    None,
                    LOST,
                    BASELINE_ARM,
                    label,
                    None,
                    rule,
                    dataset=dataset,
                    detail=f"not judged: no scored run shares a seed with {label} on {dataset}",
                )
            )
            continue
        shared = sorted(set(a) & set(b))
        base_mean = sum(b[k] for k in shared) / len(shared) if shared else 0.0
        if test.queries < 2 or base_mean <= 0:
            why = f"{test.queries} paired {unit}" if test.queries < 2 else f"{label} scores 0"
            out.append(
                Judgement(
                    row, seed, LOST, BASELINE_ARM, label, None, rule, dataset=dataset, detail=f"not judged: {why}"
                )
            )
            continue
        loss = -test.mean_difference / base_mean
        # above the threshold beyond float rounding: a loss of exactly 10 % computed as 0.1000000000000001 is not
        verdict = round(loss, 12) > LOSS_THRESHOLD and test.p_value < alpha
        detail = (
            f"{measure} {base_mean + test.mean_difference:.4f} vs {base_mean:.4f} ({test.mean_difference:+.4f}, "
            f"{-100 * loss:+.1f} %), t = {test.statistic:.3f}, p = {test.p_value:.3g} over {test.queries} {unit}"
        )
        out.append(
            Judgement(
                row,
                seed,
                LOST,
                BASELINE_ARM,
                label,
                verdict,
                rule,
                loss,
                test.p_value,
                test.queries,
                dataset=dataset,
                detail=detail,
            )
        )
    return out


def lost_key() -> str:
    """The key's line for the ``lost`` mark."""
    return (
        f"[lost N % vs baseline]: the evaluated score below the baseline's by N % (> {100 * LOSS_THRESHOLD:g} %, "
        "paired t-test), whatever training said"
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
            assert base is not None  # both comparators were kept, the baseline arm among them
            comparators = [(BOTH, base)]
        mine = _by_seed(row.runs)
        for against, other in comparators:
            theirs = _by_seed(rows[other].runs)
            for seed, run in mine.items():
                if run.stopped_early:
                    continue  # no published model to judge
                found.append(degraded(results, key, seed, run, theirs.get(seed), against, system_label(*other), alpha))
        if base is not None:
            found.extend(lost(results, key, row.runs, rows[base].runs, system_label(*base)))
        if ref is not None and ref != key:
            ref_runs = {(c.seed, c.dataset): c for c in rows[ref].runs if c.scored}
            for c in row.runs:
                if c.scored:
                    found.append(dense(key, c.seed, c, ref_runs.get((c.seed, c.dataset)), system_label(*ref)))
        out[key] = found
    return out


def marks(judgements: list[Judgement], seeds: int) -> list[str]:
    """ "degraded vs reference" (one seed) or "2/3 degraded vs reference"; a run dense on any dataset counts once;
    "lost 76 % vs baseline", the largest loss marked (judged over seeds, or on the one seed)."""
    out = []
    for label in dict.fromkeys(j.label for j in judgements):
        if label.startswith(LOST):
            losses = [j.statistic for j in judgements if j.label == label and j.verdict and j.statistic is not None]
            if losses:
                out.append(f"{LOST} {100 * max(losses):.0f} % vs {label.split(' vs ', 1)[1]}")
            continue
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
