"""Significance (paired t-test + Holm) on hand-computed numbers; the paper-style tables (Δ, bold,
dagger, outcomes, seeds, FLOPS beside the sweep, subsets); results folders that rebuild every table
from their own files, hold no machine path, and refresh from a runs folder only when asked."""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmark.evaluation.significance import holm, paired_ttest
from benchmark.pipeline.plan import Condition
from benchmark.report.build import publish
from benchmark.report.collect import collect
from benchmark.report.report_cli import main as report_main
from benchmark.report.results import ConditionResult, SuiteResults, read_results
from benchmark.stages.store import Stage, StageKind, Store
from helpers import ROOT


def _kind(name: str) -> type[StageKind]:
    """A stage kind that takes any config and any parents (the report reads only records and ids)."""
    return type(
        name.title(), (StageKind,), {"name": name, "VERSION": 1, "optional_parents": ("init", "index", "source", "run")}
    )


def S(kind: str, config: dict, parents: dict | None = None) -> Stage:  # noqa: N802  (reads like Stage)
    return Stage(_kind(kind), config, parents or {})


# --------------------------------------------------------------------------- significance


def t_cdf_df2(t: float) -> float:
    """Student's t CDF with 2 degrees of freedom, in closed form."""
    return 0.5 + t / (2 * math.sqrt(2 + t * t))


def t_cdf_df3(t: float) -> float:
    """Student's t CDF with 3 degrees of freedom, in closed form."""
    x = t / math.sqrt(3)
    return 0.5 + (x / (1 + x * x) + math.atan(x)) / math.pi


def test_paired_ttest_hand_computed():
    # differences 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t = 2 sqrt(3); df 2: p = 1 - sqrt(12/14)
    a = {"q1": 3.0, "q2": 5.0, "q3": 7.0, "only-in-a": 9.0}
    b = {"q1": 2.0, "q2": 3.0, "q3": 4.0}
    result = paired_ttest(a, b)
    assert result.queries == 3
    assert result.mean_difference == pytest.approx(2.0)
    assert result.statistic == pytest.approx(2 * math.sqrt(3))
    assert result.p_value == pytest.approx(1 - math.sqrt(6 / 7))
    assert result.p_value == pytest.approx(2 * (1 - t_cdf_df2(2 * math.sqrt(3))))
    assert paired_ttest(b, a).statistic == pytest.approx(-2 * math.sqrt(3))  # two-sided: same p
    assert paired_ttest(b, a).p_value == pytest.approx(result.p_value)


def test_paired_ttest_degenerate_cases():
    same = {"q1": 0.5, "q2": 0.25}
    assert paired_ttest(same, same).p_value == 1.0  # no variance, no difference: no evidence
    shifted = {q: v + 0.5 for q, v in same.items()}
    assert paired_ttest(shifted, same).p_value == 0.0  # a constant non-zero shift
    assert paired_ttest({"q1": 1.0}, {"q1": 0.0}).p_value == 1.0  # one query: undefined
    assert paired_ttest({"q1": 1.0}, {"q2": 0.0}).queries == 0


def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → running max
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1, then monotone
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([0.2]) == [0.2]
    assert holm([]) == []


def test_seed_ttest_pairs_seed_level_scores():
    """Seed-level scores, paired by seed: 3 common seeds → 2 degrees of freedom, exactly scipy's ttest_rel
    on the seed means (a seed on one side only does not count)."""
    from scipy.stats import ttest_rel

    from benchmark.evaluation.significance import seed_ttest

    a = {42: 0.7468, 43: 0.7431, 44: 0.7503, 45: 0.9}
    b = {42: 0.7354, 43: 0.7250, 44: 0.7460}
    result = seed_ttest(a, b)
    expected = ttest_rel([0.7468, 0.7431, 0.7503], [0.7354, 0.7250, 0.7460])
    assert (result.queries, result.unit) == (3, "seeds")
    assert result.p_value == pytest.approx(float(expected.pvalue), rel=1e-12)  # the same arithmetic
    # by hand: diffs 0.0114, 0.0181, 0.0043, mean 0.0112667, t = mean / (sd / sqrt 3) on 2 df
    diffs = [0.0114, 0.0181, 0.0043]
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    assert result.p_value == pytest.approx(2 * (1 - t_cdf_df2(mean / (sd / math.sqrt(3)))), rel=1e-9)
    assert seed_ttest({42: 0.5}, {42: 0.4}).p_value == 1.0  # one seed: undefined, no evidence


def test_holm_over_every_arm_and_dataset(tmp_path):
    """The family is the table's: two arms × two datasets, four tests, one Holm correction (not one per row)."""
    pq: dict = {}
    values = {  # per-query nDCG@10: the arms differ from the baseline by small, noisy amounts
        "baseline": {D1: [0.2, 0.4, 0.6, 0.8], D2: [0.1, 0.2, 0.3]},
        "a": {D1: [0.3, 0.51, 0.72, 0.93], D2: [0.2, 0.4, 0.6]},
        "b": {D1: [0.25, 0.42, 0.66, 0.81], D2: [0.3, 0.2, 0.35]},
    }
    conds = [run(f"{v}-{d}", d, vals[d], variant=v, perquery=pq) for v, vals in values.items() for d in (D1, D2)]
    folder = publish(suite(conds, pq), tmp_path / "hand")
    cells = cells_csv(folder)
    ps = {
        (v, d): paired_ttest(pq[f"{v}-{d}"][MEASURE], pq[f"baseline-{d}"][MEASURE]).p_value
        for v in ("a", "b")
        for d in (D1, D2)
    }
    adjusted = dict(zip(ps, holm(list(ps.values()))))
    for (v, d), p in ps.items():
        cell = cells[(f"SPLADE bb {v}", d)]
        assert float(cell["p_value"]) == pytest.approx(p, rel=1e-5)  # 6 significant digits in the csv
        assert float(cell["p_holm"]) == pytest.approx(adjusted[(v, d)], rel=1e-5)
        assert cell["test"] == "paired t-test over queries"  # one seed
    # the row-wise correction of before (×2 per row) would give a smaller adjusted p for the smallest
    assert min(adjusted.values()) == pytest.approx(4 * min(ps.values()))
    assert (
        "Holm-corrected over the table's 4 test(s) (2 arm(s) against their baseline on 2 dataset(s))"
        in (folder / "table.md").read_text()
    )


def test_judged_against_baseline_and_reference(tmp_path):
    """degraded: paired t-test of the published checkpoints' dev RR against the same backbone's baseline
    and against the BERT reference (same seed, shared dev queries), exact p from scipy; dense: non-zeros
    above √ρ_ref · |V| with hand-computed thresholds."""
    from scipy.stats import ttest_rel

    from benchmark.report.judgements import dense_threshold
    from benchmark.report.results import DEV_MEASURE

    dev = {  # train id → per-query dev RR@10 of the published checkpoint (q4 only in the reference: not shared by mb)
        "t-bert": {"q1": 1.0, "q2": 1.0, "q3": 0.5, "q4": 1.0},
        "t-mb-base": {"q1": 0.5, "q2": 0.25, "q3": 0.0},
        "t-mb-resc": {"q1": 1.0, "q2": 0.5, "q3": 0.5},
    }
    pq: dict = {t: {DEV_MEASURE: v} for t, v in dev.items()}
    # reference: 100 document / 16 query non-zeros of 40,000 → ρ 0.0025 / 0.0004 → √ρ 0.05 / 0.02 → at |V| 50,000:
    # thresholds 2,500 document and 1,000 query terms
    conds = [
        run(
            "bert",
            D1,
            [0.5, 0.5],
            backbone="bert-x",
            train_id="t-bert",
            vocab_size=40_000,
            doc_nnz=100.0,
            query_nnz=16.0,
            perquery=pq,
        ),
        run(
            "mb-base",
            D1,
            [0.4, 0.4],
            backbone="mb",
            train_id="t-mb-base",
            vocab_size=50_000,
            doc_nnz=2600.0,
            query_nnz=900.0,
            perquery=pq,
        ),
        run(
            "mb-resc",
            D1,
            [0.6, 0.6],
            backbone="mb",
            variant="rescaled",
            train_id="t-mb-resc",
            vocab_size=50_000,
            doc_nnz=2400.0,
            query_nnz=999.0,
            perquery=pq,
        ),
    ]
    assert dense_threshold(100.0, 40_000, 50_000) == pytest.approx(2500.0, rel=1e-12)
    assert dense_threshold(16.0, 40_000, 50_000) == pytest.approx(1000.0, rel=1e-12)
    folder = publish(suite(conds, pq), tmp_path / "hand")
    with open(folder / "judgements.csv") as fh:
        rows = {(r["row"], r["kind"], r["against"]): r for r in csv.DictReader(fh)}
    base_vs_ref = rows[("SPLADE mb baseline", "degraded", "reference")]
    expected = ttest_rel([0.5, 0.25, 0.0], [1.0, 1.0, 0.5])  # q1..q3: the queries both recorded
    assert float(base_vs_ref["p_value"]) == pytest.approx(float(expected.pvalue), rel=1e-5)  # 6 digits in the csv
    assert (base_vs_ref["verdict"], base_vs_ref["queries"]) == (
        "True",
        "3",
    )  # t = -7 on 2 df: p = 0.020 < 0.05, and worse
    resc_vs_base = rows[("SPLADE mb rescaled", "degraded", "baseline")]
    assert resc_vs_base["verdict"] == "False"  # better than its baseline
    resc_vs_ref = rows[("SPLADE mb rescaled", "degraded", "reference")]
    assert float(resc_vs_ref["p_value"]) == pytest.approx(
        float(ttest_rel([1.0, 0.5, 0.5], [1.0, 1.0, 0.5]).pvalue), rel=1e-5
    )
    assert resc_vs_ref["verdict"] == "False"  # p = 0.42: not significantly worse
    assert rows[("SPLADE mb baseline", "dense", "reference")]["verdict"] == "True"  # 2,600 > 2,500 documents
    assert rows[("SPLADE mb rescaled", "dense", "reference")]["verdict"] == "False"  # 2,400 and 999: below both
    assert float(rows[("SPLADE mb baseline", "dense", "reference")]["statistic"]) == pytest.approx(
        2600 / 2500, rel=1e-5
    )
    assert not any(r["row"] == "SPLADE bert-x baseline" for r in rows.values())  # the reference is not judged
    lines = table_lines(folder)
    assert "| SPLADE mb baseline [degraded vs reference, dense vs reference] | 0.4000 |" in lines
    assert "| SPLADE mb rescaled | **0.6000** (+0.2000)† |" in lines  # a constant shift over 2 queries: p = 0
    md = (folder / "table.md").read_text()
    assert (
        "SPLADE mb baseline, seed 1: degraded vs reference (SPLADE bert-x baseline): dev MRR@10 0.2500 vs 0.8333" in md
    )
    assert "document 2600.0 vs threshold 2500.0 (reference 100.0 of 40000)" in md


# --------------------------------------------------------------------------- hand-made results

D1, D2 = "beir/alpha/test", "beir/beta/test"
MEASURE = "nDCG@10"


def run(
    key: str,
    dataset: str,
    values: list[float] | None,
    system: str = "splade",
    backbone: str = "bb",
    variant: str = "baseline",
    seed: int | None = 1,
    perquery: dict | None = None,
    **extra,
) -> ConditionResult:
    """A condition scored ``values`` per query (their mean is the aggregate); None: not scored."""
    c = ConditionResult(
        key=key,
        dataset=dataset,
        system=system,
        backbone=backbone if system == "splade" else "",
        variant=variant if system == "splade" else "",
        trained=system == "splade",
        seed=seed if system == "splade" else None,
        command=f"python -m benchmark.run --suite hand  # {key}",
        **extra,
    )
    if values is not None:
        c.metrics = {MEASURE: sum(values) / len(values)}
        c.queries = len(values)
        if perquery is not None:
            perquery[key] = {MEASURE: {f"q{i}": v for i, v in enumerate(values)}}
    return c


def suite(conditions: list[ConditionResult], perquery: dict, **extra) -> SuiteResults:
    columns = list(dict.fromkeys(c.dataset for c in conditions))
    return SuiteResults(
        suite="hand",
        measures=[MEASURE],
        conditions=conditions,
        columns=columns,
        table={"measure": MEASURE, **extra.pop("table", {})},
        perquery=perquery,
        **extra,
    )


def table_lines(folder: Path) -> list[str]:
    return [line for line in (folder / "table.md").read_text().splitlines() if line.startswith("|")]


def cells_csv(folder: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(folder / "table.csv") as fh:
        return {(r["row"], r["column"]): r for r in csv.DictReader(fh)}


PERQUERY = {  # row → dataset → per-query nDCG@10 (means are the aggregate metrics)
    "bm25": {D1: [0.45, 0.45, 0.45, 0.45], D2: [0.3, 0.3, 0.3]},
    "bb-base": {D1: [0.2, 0.4, 0.6, 0.8], D2: [0.1, 0.2, 0.3]},
    "bb-resc": {D1: [0.3, 0.51, 0.72, 0.93], D2: [0.2, 0.4, 0.6]},  # Δ 0.10..0.13 / 0.1, 0.2, 0.3
    "bb2-resc": {D1: [0.7, 0.7, 0.7, 0.7], D2: [0.1, 0.1, 0.1]},
    "bb3-base": {D1: [0.6, 0.6, 0.6, 0.6]},
}


def paper_results() -> SuiteResults:
    pq: dict = {}
    stopped = {"outcome": "collapsed", "outcome_reason": "non_finite", "outcome_step": 300, "stopped_early": True}
    conds = []
    for d in (D1, D2):
        short = d.split("/")[1]
        conds += [
            run(f"bm25-{short}", d, PERQUERY["bm25"][d], system="bm25", perquery=pq),
            run(f"bb-base-{short}", d, PERQUERY["bb-base"][d], perquery=pq),
            run(f"bb-resc-{short}", d, PERQUERY["bb-resc"][d], variant="rescaled", perquery=pq),
            run(f"bb2-base-{short}", d, None, backbone="bb2", **stopped),
            run(f"bb2-resc-{short}", d, PERQUERY["bb2-resc"][d], backbone="bb2", variant="rescaled", perquery=pq),
        ]
    conds += [
        run("bb3-base-alpha", D1, PERQUERY["bb3-base"][D1], backbone="bb3", perquery=pq),
        run("bb3-base-beta", D2, None, backbone="bb3", outcome="collapsed", outcome_step=200, stopped_early=True),
    ]
    return suite(conds, pq, table={"averages": [{"name": "avg", "datasets": [D1, D2]}]})


def test_table_delta_bold_dagger_collapsed(tmp_path):
    folder = publish(paper_results(), tmp_path / "hand")
    assert table_lines(folder) == [
        "| nDCG@10 | alpha | beta | avg |",
        "|---|---:|---:|---:|",
        "| BM25 | 0.4500 | 0.3000 | 0.3750 |",
        "| SPLADE bb baseline | 0.5000 | 0.2000 | 0.3500 |",
        # d1: Δ 0.10, 0.11, 0.12, 0.13 (tiny variance) is significant after Holm; d2 (p = 0.074) is not
        "| SPLADE bb rescaled | 0.6150 (+0.1150)† | **0.4000** (+0.2000) | **0.5075** (+0.1575) |",
        # stopped at its collapse: no score, never 0, with the step
        "| SPLADE bb2 baseline [collapsed] | collapsed (step 300) | collapsed (step 300) | collapsed |",
        # no Δ: its baseline has no score; ‡: a constant shift from BM25 on every query (p = 0), better or worse
        "| SPLADE bb2 rescaled | **0.7000**‡ | 0.1000‡ | 0.4000 |",
        "| SPLADE bb3 baseline [collapsed] | 0.6000‡ | collapsed (step 200) | 0.6000* |",  # the average leaves it out
    ]
    md = (folder / "table.md").read_text()
    assert 'a run stopped at its collapse has no score and its cells read "collapsed" with the step, never 0' in md
    assert "Averages include every score shown, collapsed or degraded runs included; *: an average" in md
    assert "Holm-corrected over the table's 2 test(s) (1 arm(s) against their baseline on 2 dataset(s))" in md
    assert "SPLADE bb2 baseline, seed 1: collapsed at step 300 (non_finite), stopped there: no score." in md

    cells = cells_csv(folder)
    d1, d2 = cells[("SPLADE bb rescaled", D1)], cells[("SPLADE bb rescaled", D2)]
    p1 = 2 * (1 - t_cdf_df3(0.115 / (math.sqrt(0.0005 / 3) / 2)))  # diffs 0.10..0.13: sd sqrt(0.0005/3)
    p2 = 1 - math.sqrt(6 / 7)  # diffs 0.1, 0.2, 0.3: t = 2 sqrt(3) on 2 df
    # 1e-5: the csv keeps 6 significant digits of p; the values themselves are exact to float64 (~1e-15)
    assert float(d1["p_value"]) == pytest.approx(p1, rel=1e-5)
    assert float(d2["p_value"]) == pytest.approx(p2, rel=1e-5)
    assert float(d1["p_holm"]) == pytest.approx(2 * p1, rel=1e-5)  # the smaller p, times 2
    assert float(d2["p_holm"]) == pytest.approx(p2, rel=1e-5)  # max(2 p1, 1 × p2)
    assert (d1["significant"], d2["significant"]) == ("True", "False")
    # against BM25 (0.3 on every beta query): diffs -0.1, 0.1, 0.3, t = sqrt(3)/2 on 2 df
    assert float(d2["p_bm25"]) == pytest.approx(1 - math.sqrt(3 / 11), rel=1e-5)
    assert (d1["significant_bm25"], d2["significant_bm25"]) == ("False", "False")
    shifted = cells[("SPLADE bb2 rescaled", D1)]
    assert (float(shifted["p_bm25"]), shifted["significant_bm25"], shifted["p_value"]) == (0.0, "True", "")
    assert (
        "‡: significant at α = 0.05 against BM25 by a two-sided paired t-test over queries (unit: a query), "
        "Holm-corrected over the row's 2 dataset(s)"
    ) in md
    assert (
        "†: significant at α = 0.05 against that baseline by a two-sided paired t-test over queries (unit: a "
        "query), Holm-corrected"
    ) in md
    page = (folder / "index.html").read_text()
    assert (
        "p-values, raw and Holm-adjusted (α = 0.05). † against the baseline: a two-sided paired t-test over "
        "queries (unit: a query), Holm-corrected over the table&#x27;s 2 test(s)"
    ) in page
    collapsed = cells[("SPLADE bb2 baseline", D1)]
    assert (collapsed["status"], collapsed["value"], collapsed["collapse_steps"]) == ("collapsed", "", "step 300")
    avg = cells[("SPLADE bb3 baseline", "avg")]
    assert (avg["value"], avg["partial"], avg["best"]) == ("0.600000", "True", "False")

    tex = (folder / "table.tex").read_text()
    assert (
        r"SPLADE bb rescaled & 0.6150\,{\scriptsize(+0.1150)}$^\dagger$ & \textbf{0.4000}\,{\scriptsize(+0.2000)}"
        in tex
    )
    assert (
        r"SPLADE bb2 baseline \textit{(collapsed)} & \textit{collapsed} (step 300) & \textit{collapsed} (step 300) & "
        r"\textit{collapsed} \\" in tex
    )
    assert r"\begin{tabular}{lrrr}" in tex and r"\bottomrule" in tex


def test_seeds_mean_sd_outcome_counts_and_seed_level_test(tmp_path):
    """Three seeds per row: seed mean ± sd, "1/3 collapsed", and the dagger from a paired t-test over
    seeds (each seed's score one observation; closed-form p on k − 1 degrees of freedom). The
    per-query test on seed-averaged scores stays in table.csv as p_query."""
    pq: dict = {}
    scored_collapse = {"outcome": "collapsed", "outcome_reason": "dense", "outcome_step": 250}
    conds = [
        run("b1", D1, [0.2, 0.4, 0.6], seed=1, perquery=pq),
        run("b2", D1, [0.4, 0.4, 0.4], seed=2, perquery=pq),
        run("b3", D1, [0.3, 0.4, 0.5], seed=3, perquery=pq),  # seed average per query: 0.3, 0.4, 0.5
        run("r1", D1, [0.4, 0.6, 0.8], variant="rescaled", seed=1, perquery=pq),
        run(
            "r2",
            D1,
            [0.5, 0.7, 0.9],
            variant="rescaled",
            seed=2,
            perquery=pq,
            outcome="degraded",
            outcome_reason="dev_rr_dropped",
            outcome_step=400,
        ),
        run(
            "r3", D1, [0.6, 0.5, 0.7], variant="rescaled", seed=3, perquery=pq, **scored_collapse
        ),  # trained to its end
        run("s1", D1, [0.1, 0.2, 0.3], variant="x4", seed=1, perquery=pq),
        run("s2", D1, [0.3, 0.2, 0.2], variant="x4", seed=2, perquery=pq),
        run("s3", D1, None, variant="x4", seed=3, outcome="collapsed", outcome_step=120, stopped_early=True),
        *[
            run(f"z{s}", D1, None, variant="x16", seed=s, outcome="collapsed", outcome_step=100 * s, stopped_early=True)
            for s in (1, 2, 3)
        ],
    ]
    folder = publish(suite(conds, pq, seeds=[1, 2, 3]), tmp_path / "hand")
    assert table_lines(folder)[2:] == [
        "| SPLADE bb baseline | 0.4000 ± 0.0000 |",
        # seed means 0.6, 0.7, 0.6 against 0.4, 0.4, 0.4: diffs 0.2, 0.3, 0.2
        "| SPLADE bb rescaled [1/3 collapsed, 1/3 degraded] | **0.6333** ± 0.0577 (+0.2333)† |",
        # seed means 0.2, 0.7/3; the stopped seed is left out
        "| SPLADE bb x4 [1/3 collapsed] | 0.2167 ± 0.0236 (-0.1833) n=2/3 |",
        "| SPLADE bb x16 [3/3 collapsed] | collapsed (steps 100–300) |",
    ]
    cells = cells_csv(folder)
    rescaled = cells[("SPLADE bb rescaled", D1)]
    # seed diffs 0.2, 0.3, 0.2: mean 0.7/3, sd 1/sqrt(300), t = 7 on 2 df
    assert float(rescaled["p_value"]) == pytest.approx(
        2 * (1 - t_cdf_df2(7.0)), rel=1e-5
    )  # 6 significant digits in the csv
    assert (rescaled["seeds"], rescaled["of"], rescaled["outcomes"]) == ("3", "3", "1/3 collapsed, 1/3 degraded")
    assert rescaled["test"] == "paired t-test over seeds"
    # the per-query test on seed averages (0.5, 0.6, 0.8 against 0.3, 0.4, 0.5: diffs 0.2, 0.2, 0.3) happens to
    # give the same t here; it is kept as p_query
    assert float(rescaled["p_query"]) == pytest.approx(2 * (1 - t_cdf_df2(7.0)), rel=1e-5)
    x4 = cells[("SPLADE bb x4", D1)]
    # seed diffs -0.2, -0.5/3 on the 2 seeds both rows scored: mean -0.55/3, sd 1/sqrt(1800), t = -11 on 1 df
    # (Cauchy: two-sided p = 1 - 2 atan(11) / π)
    assert float(x4["p_value"]) == pytest.approx(1 - 2 * math.atan(11.0) / math.pi, rel=1e-5)
    # per query: 0.2, 0.2, 0.25 (x4's two seeds) against 0.3, 0.4, 0.5: diffs -0.1, -0.2, -0.25, sd sqrt(7/1200)
    t_query = (0.55 / 3) / math.sqrt(7 / 1200 / 3)
    assert float(x4["p_query"]) == pytest.approx(2 * (1 - t_cdf_df2(t_query)), rel=1e-5)
    assert x4["significant"] == "False"
    md = (folder / "table.md").read_text()
    assert "SPLADE bb rescaled, seed 3: collapsed at step 250 (dense), trained to its end and scored." in md
    assert "SPLADE bb rescaled, seed 2: degraded at step 400 (dev_rr_dropped)." in md
    assert "±: sample standard deviation over seeds." in md and "Seeds: 1, 2, 3." in md
    # the dagger names its own test, unit and family: over seeds here, never "over queries"
    assert (
        "†: significant at α = 0.05 against that baseline by a two-sided paired t-test over seeds (unit: a "
        "seed's score, paired by seed; the seed-to-seed variance counts), Holm-corrected over the table's 2 test(s)"
    ) in md
    page = (folder / "index.html").read_text()
    assert "† against the baseline: a two-sided paired t-test over seeds (unit: a seed&#x27;s score" in page
    assert "over queries" not in page.split("p-values, raw and Holm-adjusted")[1].split("</caption>")[0]

    with open(folder / "metrics.csv") as fh:
        metrics = {(r["variant"], r["seed"]): r for r in csv.DictReader(fh)}
    assert metrics[("rescaled", "3")]["outcome"] == "collapsed" and metrics[("rescaled", "3")]["value"] == repr(0.6)
    assert metrics[("x4", "3")]["value"] == "" and metrics[("x4", "3")]["outcome_step"] == "120"  # never 0


def test_sweep_table_shows_flops_and_nonzeros_and_plot(tmp_path):
    """The scale sweep: FLOPS and non-zeros beside each arm's score; score and FLOPS vs. factor on a log2 axis."""
    pq: dict = {}
    arms = [
        ("baseline", "1", [0.25, 0.75], 2.0, 30.0, 80.0),
        ("x0.25", "0.25", [0.275, 0.825], 6.5, 137.0, 304.0),
        ("x1", "1", [0.25, 0.75], 2.0, 30.0, 80.0),
        ("x4", "4", [0.15, 0.45], 0.5, 4.0, 20.0),
    ]
    conds = [run("bm25", D1, [0.5, 0.5], system="bm25", perquery=pq)]
    conds += [
        run(v, D1, vals, variant=v, factor=f, FLOPS=fl, query_nnz=q, doc_nnz=d, perquery=pq)
        for v, f, vals, fl, q, d in arms
    ]
    conds.append(
        run("x16", D1, None, variant="x16", factor="16", outcome="collapsed", outcome_step=50, stopped_early=True)
    )
    folder = publish(suite(conds, pq), tmp_path / "sweep")
    assert table_lines(folder) == [
        "| nDCG@10 | alpha | FLOPS | q nnz | d nnz |",
        "|---|---:|---:|---:|---:|",
        "| BM25 | 0.5000 |  |  |  |",
        "| SPLADE bb baseline | 0.5000 | 2.000 | 30.0 | 80.0 |",
        "| SPLADE bb x0.25 | **0.5500** (+0.0500) | 6.500 | 137.0 | 304.0 |",
        "| SPLADE bb x1 | 0.5000 (0.0000) | 2.000 | 30.0 | 80.0 |",  # a zero Δ has no ±, which would read as an sd
        "| SPLADE bb x4 | 0.3000 (-0.2000) | 0.500 | 4.0 | 20.0 |",
        "| SPLADE bb x16 [collapsed] | collapsed (step 50) |  |  |  |",
    ]
    png = (folder / "sweep.png").read_bytes()
    # a PNG, and a real figure: two panels of lines and text are tens of kB, an empty canvas ~5 kB
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert not (folder / "averages.png").exists()  # one backbone: nothing to compare across
    assert "FLOPS: expected multiplications per query–document dot product" in (folder / "table.md").read_text()


def test_tables_say_which_subset(tmp_path):
    pq: dict = {}
    conds = [run("bm25", D1, [0.5, 0.5], system="bm25", perquery=pq)]
    folder = publish(
        suite(conds, pq, subset="max-docs=600,max-queries=30", max_docs=600, max_queries=30),
        tmp_path / "hand@max-docs=600,max-queries=30",
    )
    md = (folder / "table.md").read_text()
    assert md.startswith("# hand @ max-docs=600,max-queries=30\n")
    assert "## hand @ max-docs=600,max-queries=30: nDCG@10" in md
    assert "Subset: max-docs=600,max-queries=30 (a narrowed run, not the suite's full datasets)." in md
    assert "hand @ max-docs=600,max-queries=30" in (folder / "index.html").read_text()
    declared = publish(suite(conds, pq, max_docs=2000), tmp_path / "declared")
    assert (
        "Data: 2000 documents per corpus (judged documents kept), as the suite declares."
        in (declared / "table.md").read_text()
    )


# --------------------------------------------------------------------------- results folders


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rebuild_from_results_alone_one_line_per_broken_folder(tmp_path, capsys):
    results = tmp_path / "results"
    folder = publish(paper_results(), results / "hand")
    first = _files(folder)
    assert {
        "results.json",
        "perquery.csv.gz",
        "metrics.csv",
        "table.md",
        "table.csv",
        "table.tex",
        "index.html",
    } <= set(first)
    for name in ("metrics.csv", "table.md", "table.csv", "table.tex", "index.html"):
        (folder / name).unlink()
    (results / "broken").mkdir()
    (results / "broken" / "results.json").write_text("{not json")
    (results / "perf").mkdir()
    (results / "perf" / "perf.md").write_text("not a suite")

    assert report_main(["--results-dir", str(results)]) == 1  # one folder could not be rebuilt
    out, err = capsys.readouterr()
    assert _files(folder) == first  # every file again, byte for byte, from results.json and perquery.csv.gz alone
    assert f"rebuilt {folder}" in out and f"skipped {results / 'perf'}: no results.json" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"failed {results / 'broken'}: ") and "not valid JSON" in lines[0]

    assert report_main(["--results-dir", str(results), "--suite", "hand"]) == 0
    assert report_main(["--results-dir", str(results), "--suite", "nope"]) == 1
    assert "failed nope: no folder" in capsys.readouterr().err
    assert report_main(["--results-dir", str(results), "--runs-dir", str(tmp_path)]) == 2  # runs only with --refresh
    assert report_main(["--results-dir", str(tmp_path / "absent")]) == 2


def _stage(store: Store, stage: Stage, record: dict, files: dict[str, str | bytes] | None = None) -> None:
    def write(out: Path) -> dict:
        for name, content in (files or {}).items():
            (out / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        return record

    store.run(stage, write)


def test_collect_reads_stages_writes_no_machine_path_and_refreshes(tmp_path, capsys):
    """``collect`` reads what the stages recorded (both train-record formats); the folder it writes
    names no path of this machine; ``--refresh`` rebuilds it from the runs folder."""
    runs = tmp_path / "machine-specific" / "runs"
    store = Store(runs, log=lambda line: None)
    local = str(tmp_path / "machine-specific" / "data" / "myset")  # a local BEIR folder, by absolute path
    png = b"\x89PNG\r\n\x1a\n" + b"telemetry"
    conditions = []
    records = {  # variant → train record: the current format (trained to its end), and the earlier one (stopped)
        "x4": {
            "outcome": "collapsed",
            "outcome_reason": "dense",
            "outcome_step": 800,
            "stopped_early": False,
            "outcome_detail": f"dense at {runs}/train",
            "seed": 7,
            "vocab_size": 30522,
            "checkpoint_step": 800,
            "dev_query_keys": ["k1", "k2"],
            "dev_rr_published": [1.0, 0.5],
        },  # train VERSION 3
        "x16": {"status": "collapsed", "collapse_reason": "zero", "collapse_step": 20, "seed": 7},
    }
    for variant, record in records.items():
        backbone = S("backbone", {"v": variant})
        _stage(
            store,
            backbone,
            {
                "factor": float(variant[1:]),
                "head_norm_before": 10.0,
                "head_norm_after": 10.0 * float(variant[1:]),
                "source": local,
            },
        )
        train = S("train", {"v": variant}, {"init": backbone})
        _stage(store, train, record, {"telemetry.png": png})
        search = S("search", {"v": variant}, {"index": S("index", {"v": variant}, {"source": train})})
        _stage(store, search, {"FLOPS": 1.5, "doc_nnz": 90.0, "query_nnz": 20.0})
        evaluate = S("evaluate", {"v": variant}, {"run": search})
        _stage(
            store,
            evaluate,
            {"metrics": {MEASURE: 0.25}, "queries": 2},
            {"perquery.tsv": f"measure\tquery_id\tvalue\n{MEASURE}\tq1\t0.0\n{MEASURE}\tq2\t0.5\n"},
        )
        conditions.append(
            Condition(
                local,
                "splade",
                "bb",
                variant,
                variant[1:],
                trained=True,
                evaluate=evaluate,
                train=train,
                command=f"python -m benchmark.run --suite {tmp_path}/s.toml --datasets {local} --runs-dir {runs}",
            )
        )

    class Plan:  # a PlanView: what collect reads of a plan
        suite = type("S", (), {"name": "hand", "description": "", "table": {"measure": MEASURE}, "expected": None})()
        measures, dataset_measures, columns, groups = [MEASURE], {local: [MEASURE]}, [local], {}
        max_docs, max_queries, seeds, subset, training = None, None, [7], None, ""

    Plan.conditions = conditions
    results = collect(Plan(), store)
    x4, x16 = results.conditions
    assert (x4.outcome, x4.stopped_early, x4.outcome_step, x4.metrics, x4.seed) == (
        "collapsed",
        False,
        800,
        {MEASURE: 0.25},
        7,
    )
    assert (x16.outcome, x16.stopped_early, x16.outcome_step, x16.metrics) == (
        "collapsed",
        True,
        20,
        {},
    )  # earlier format
    assert (x4.FLOPS, x4.doc_nnz, x4.query_nnz, x4.scale, x4.head_norm_after) == (1.5, 90.0, 20.0, 4.0, 40.0)
    assert x4.dataset == "local:myset" and results.perquery[x4.key] == {MEASURE: {"q1": 0.0, "q2": 0.5}}
    # the published checkpoint's dev values, once per training run under its stage id (refreshed below as well)
    assert (
        results.perquery[x4.train_id] == {"dev RR@10": {"k1": 1.0, "k2": 0.5}} and x16.train_id not in results.perquery
    )
    assert (x4.vocab_size, x4.checkpoint_step, x16.vocab_size) == (30522, 800, None)
    assert x4.command == "python -m benchmark.run --suite s.toml --datasets $DATA/myset --runs-dir runs"

    results_dir = tmp_path / "results"
    folder = publish(results, results_dir / "hand")
    assert (folder / x4.telemetry).read_bytes() == png
    assert table_lines(folder)[2:] == [
        "| SPLADE bb x4 [collapsed] | 0.2500 | 1.500 | 20.0 | 90.0 |",
        "| SPLADE bb x16 [collapsed] | collapsed (step 20) |  |  |  |",
    ]
    first = _files(folder)
    for name, content in first.items():  # no machine path in any file, compressed ones included
        text = gzip.decompress(content) if name.endswith(".gz") else content
        for path in (str(tmp_path), "/tmp/", str(Path.home()), "machine-specific"):
            assert path.encode() not in text, (name, path)

    record = (folder / "results.json").read_bytes()
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "results.json").write_bytes(record)  # only the record of stage ids: everything else from runs/
    assert report_main(["--results-dir", str(results_dir), "--refresh", "hand", "--runs-dir", str(runs)]) == 0
    assert _files(folder) == first
    (runs / "search").rename(runs / "search-aside")  # the evaluations stay: the FLOPS would go blank
    assert report_main(["--results-dir", str(results_dir), "--refresh", "hand", "--runs-dir", str(runs)]) == 1
    err = capsys.readouterr().err
    assert "2 search stage(s) of hand are not in" in err and "past-2^24 flags would be lost; nothing written" in err
    assert _files(folder) == first
    (runs / "search-aside").rename(runs / "search")
    shutil.rmtree(runs / "evaluate")
    assert report_main(["--results-dir", str(results_dir), "--refresh", "hand", "--runs-dir", str(runs)]) == 1
    err = capsys.readouterr().err
    assert "1 of 2 scored condition(s) of hand are not in" in err and "nothing written" in err
    assert _files(folder) == first


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_report_on_the_pipeline_fixture(untrained_splade, tmp_path):
    """A real run's folder: the slice its suite declares in the footnotes, rebuilt identically from a copy
    that has no runs folder beside it, and refreshed identically from the runs folder."""
    results = untrained_splade["results"]
    before = (results / "table.md").read_text()
    assert "## mini: nDCG@10" in before
    assert (
        "600 documents per corpus (judged documents kept) and 30 queries per dataset, as the suite declares" in before
    )
    assert "| BM25 | **0.7805** |" in before
    assert "| SPLADE bert-tiny baseline (untrained) | 0.7314 |" in before
    copy = tmp_path / "clone" / "results"
    shutil.copytree(results, copy / "mini")
    files = _files(copy / "mini")
    for name in ("table.md", "index.html", "metrics.csv"):
        (copy / "mini" / name).unlink()
    assert report_main(["--results-dir", str(copy)]) == 0
    assert _files(copy / "mini") == files
    for name, content in files.items():
        text = gzip.decompress(content) if name.endswith(".gz") else content
        assert str(untrained_splade["runs"].parent).encode() not in text, name
    assert (
        report_main(["--results-dir", str(copy), "--refresh", "mini", "--runs-dir", str(untrained_splade["runs"])]) == 0
    )
    assert _files(copy / "mini") == files


@pytest.mark.parametrize("suite", ["smoke", "scale-sweep", "paper-mini"])
def test_committed_results_rebuild_identically(suite, tmp_path):
    """The committed tables, page and metrics.csv are what their own results.json and perquery.csv.gz give."""
    committed = ROOT / "results" / suite
    if not (committed / "results.json").is_file():
        pytest.skip(f"results/{suite} is not committed in the self-contained format")
    copy = tmp_path / "results" / suite
    shutil.copytree(committed, copy)
    assert report_main(["--results-dir", str(tmp_path / "results")]) == 0
    for name in ("metrics.csv", "table.md", "table.csv", "table.tex", "table-notes.tex", "index.html"):
        assert (copy / name).read_bytes() == (committed / name).read_bytes(), name


def test_exports_tagged_runs_mteb_json_and_titled_telemetry(tmp_path):
    """Per condition: the TREC run with a tag naming the system, an MTEB-style JSON of its scores, and a
    telemetry plot redrawn from telemetry.csv under a title naming row, method, factor, seed and outcome."""
    from PIL import Image

    from benchmark.report.mteb import mteb_key, task_and_split
    from benchmark.report.plots import telemetry_title

    store = Store(tmp_path / "runs", log=lambda line: None)
    backbone = S("backbone", {"v": "x4"})
    _stage(store, backbone, {"factor": 4.0, "head_norm_before": 10.0, "head_norm_after": 40.0})
    train = S("train", {"v": "x4"}, {"init": backbone})
    rows = "step,loss,nnz_d,dev_mrr\n0,,,0.5\n10,2.5,120.0,\n20,1.5,80.0,0.6\n"
    _stage(
        store,
        train,
        {
            "outcome": "degraded",
            "outcome_reason": "dev_mrr_drop",
            "outcome_step": 20,
            "seed": 44,
            "triggers_armed_step": 10,
        },
        {"telemetry.png": b"\x89PNG\r\n\x1a\nold", "telemetry.csv": rows},
    )
    search = S("search", {"v": "x4"}, {"index": S("index", {"v": "x4"}, {"source": train})})
    _stage(
        store,
        search,
        {"FLOPS": 1.5, "doc_nnz": 90.0, "query_nnz": 20.0},
        {"run.trec": "q1 Q0 d1 1 9.500000 benchmark\nq1 Q0 d2 2 8.000000 benchmark\nq2 Q0 d3 1 7.250000 benchmark\n"},
    )
    evaluate = S("evaluate", {"v": "x4"}, {"run": search})
    _stage(store, evaluate, {"metrics": {"nDCG@10": 0.25, "RR@10": 0.5, "R(rel=2)@1000": 0.75}, "queries": 2})
    cond = Condition(
        "beir/scifact/test",
        "splade",
        "bb",
        "x4",
        factor="4",
        method="head-norm",
        trained=True,
        evaluate=evaluate,
        train=train,
        search=search,
        command="python -m benchmark.run --suite hand",
    )

    class Plan:
        suite = type("S", (), {"name": "hand", "description": "", "table": {"measure": "nDCG@10"}, "expected": None})()
        measures, dataset_measures, columns, groups = (
            ["nDCG@10", "RR@10", "R(rel=2)@1000"],
            {},
            ["beir/scifact/test"],
            {},
        )
        max_docs, max_queries, seeds, subset, training, conditions = None, None, [44], None, "", [cond]

    results = collect(Plan(), store)
    [c] = results.conditions
    folder = publish(results, tmp_path / "results" / "hand")
    assert c.run_file == f"trec/{c.key}.trec.gz"
    assert gzip.decompress((folder / c.run_file).read_bytes()).decode() == (
        "q1 Q0 d1 1 9.500000 splade.bb.x4.head-norm-4.seed44\nq1 Q0 d2 2 8.000000 splade.bb.x4.head-norm-4.seed44\n"
        "q2 Q0 d3 1 7.250000 splade.bb.x4.head-norm-4.seed44\n"
    )
    mteb = json.loads((folder / "mteb" / "splade.bb.x4.head-norm-4.seed44" / "SciFact.json").read_text())
    [scores] = mteb["scores"]["test"]
    assert (mteb["task_name"], scores["ndcg_at_10"], scores["mrr_at_10"], scores["main_score"]) == (
        "SciFact",
        0.25,
        0.5,
        0.25,
    )
    assert (
        "recall_at_1000" not in scores and scores["ir_measures"]["R(rel=2)@1000"] == 0.75
    )  # graded recall: no MTEB name
    assert (mteb_key("R@100"), mteb_key("P@5"), mteb_key("AP")) == ("recall_at_100", "precision_at_5", None)
    assert task_and_split("beir/cqadupstack/android") == ("CQADupstackRetrieval", "test")
    assert task_and_split("beir/nfcorpus/dev") == ("NFCorpus", "dev")
    assert telemetry_title(c) == "SPLADE bb x4 · head-norm ×4 · seed 44 · degraded at step 20 (dev_mrr_drop)"
    png = (folder / c.telemetry).read_bytes()
    assert png != b"\x89PNG\r\n\x1a\nold" and Image.open(folder / c.telemetry).size == (
        1600,
        560,
    )  # redrawn: 20×7 in at 80 dpi
    html = (folder / "index.html").read_text()
    assert f'href="{c.run_file}"' in html and 'href="mteb/splade.bb.x4.head-norm-4.seed44/SciFact.json"' in html
    # each TREC export listed by its system, dataset and seed, not by its file's hash alone
    assert (
        '<th scope="row" class="label">SPLADE bb x4</th><td>scifact</td><td>44</td>'
        f'<td><code>splade.bb.x4.head-norm-4.seed44</code></td><td><a href="{c.run_file}">'
    ) in html

    # a rebuild keeps a plot drawn from the same rows, labels and code; an edited row is drawn again
    from benchmark.training.telemetry import png_key

    key, mtime = png_key(folder / c.telemetry), (folder / c.telemetry).stat().st_mtime_ns
    assert key is not None and report_main(["--results-dir", str(folder.parent)]) == 0
    assert (folder / c.telemetry).read_bytes() == png and (folder / c.telemetry).stat().st_mtime_ns == mtime
    csv_file = folder / "telemetry" / f"{c.train_id}.csv"
    csv_file.write_text(csv_file.read_text().replace("80.0", "81.0"))
    assert report_main(["--results-dir", str(folder.parent)]) == 0
    assert png_key(folder / c.telemetry) not in (None, key) and (folder / c.telemetry).read_bytes() != png


def test_every_splade_row_names_its_encode_precision(tmp_path):
    """float32 is the exact path and bf16 is not: the tables say which one each SPLADE row used, and the
    precision survives results.json."""
    pq: dict = {}
    conds = [
        run("bm25", D1, [0.5], system="bm25", perquery=pq),
        run("f32", D1, [0.4], perquery=pq, precision="float32"),
        run("bf16", D1, [0.3], variant="rescaled", perquery=pq, precision="bfloat16"),
    ]
    md = (publish(suite(conds, pq), tmp_path / "mixed") / "table.md").read_text()
    assert (
        "Encoded in float32 (the exact path: canonical impacts, the same on every encode path): SPLADE bb baseline; "
        "bfloat16: SPLADE bb rescaled."
    ) in md
    uniform = publish(suite(conds[:2], pq), tmp_path / "uniform")
    assert (
        "Encoded in float32 (the exact path: canonical impacts, the same on every encode path): every SPLADE row."
        in (uniform / "table.md").read_text()
    )
    assert [c.precision for c in read_results(uniform).conditions] == ["", "float32"]


def test_runs_past_float32_are_named_on_the_page_and_in_results_json(tmp_path):
    """A run whose summed impacts passed 2**24 is named under the table, with what was made exact and what
    stays float32's; results.json keeps both counts per condition; a run without such queries is not named."""
    pq: dict = {}
    conds = [
        run("b", D1, [0.2, 0.4], perquery=pq),
        run("r", D1, [0.3, 0.5], variant="rescaled", perquery=pq, past_float32=3, rescored_exactly=3),
        run("s", D1, [0.3, 0.5], variant="dense", perquery=pq, past_float32=1),
    ]
    folder = publish(suite(conds, pq), tmp_path / "hand")
    md = (folder / "table.md").read_text()
    assert (
        "Past 2^24: SPLADE bb rescaled, seed 1 on alpha: 3 queries summed impacts beyond 16,777,216, where Lucene's "
        "float32 scores round; 3 rescored to their exact integer dot products. Which documents made the top k "
        "was decided in float32."
    ) in md
    assert "Past 2^24: SPLADE bb dense, seed 1 on alpha: 1 query summed impacts" in md and "not rescored" in md
    assert "Past 2^24: SPLADE bb baseline" not in md
    assert "Past 2^24: SPLADE bb rescaled" in (folder / "index.html").read_text()
    data = json.loads((folder / "results.json").read_text())
    counts = {c["variant"]: (c["past_float32"], c["rescored_exactly"]) for c in data["conditions"]}
    assert counts == {"baseline": (0, 0), "rescaled": (3, 3), "dense": (1, 0)}


def test_a_recovered_collapse_is_an_event_under_the_table_not_a_mark(tmp_path):
    """A run whose collapse trigger fired during training but no longer held on the published checkpoint is
    ok (scored, unmarked), and the event is named under the table."""
    pq: dict = {}
    detail = "recovered: degenerate_support fired at step 24 (…) and no longer holds at the published step 26"
    conds = [
        run("b", D1, [0.2, 0.4], perquery=pq),
        run("r", D1, [0.3, 0.5], variant="x16", perquery=pq, outcome_detail=detail),
    ]
    folder = publish(suite(conds, pq), tmp_path / "hand")
    assert [line for line in table_lines(folder) if line.startswith("| SPLADE bb x16")][0].startswith(
        "| SPLADE bb x16 | **0.4000** (+0.1000)"
    )  # no [collapsed] mark after the label
    assert f"SPLADE bb x16, seed 1: ok, {detail}." in (folder / "table.md").read_text()


# --------------------------------------------------------------------------- the page's key, folded notes, LaTeX


def test_a_short_key_under_each_table_and_the_notes_one_click_away(tmp_path):
    """Under a table: a key to its symbols, a few words each. Every note is still there, in full, behind a
    click (a <details> block on the page and in table.md), and the terminal's closing table leaves them out."""
    from benchmark.report.build import headline
    from benchmark.report.html import table_html
    from benchmark.report.table import suite_tables

    results = paper_results()
    folder = publish(results, tmp_path / "hand")
    [first] = suite_tables(read_results(folder))[:1]
    assert first.legend == [
        "(+Δ): vs the same backbone's baseline",
        "†: significant vs that baseline (paired t-test over queries, Holm, α = 0.05)",
        "‡: significant vs BM25 (over queries, Holm, α = 0.05)",
        "bold: best in the column",
        "[collapsed] / [degraded]: the training run's outcome; [… vs baseline] / [… vs reference]: judged against "
        "another run",
        "collapsed (step N): stopped at its collapse, no score (never 0)",
        "*: an average that leaves out columns without a score",
    ]
    assert len(" ".join(first.legend).split()) < 80 < len(" ".join(first.notes).split())  # short; the notes are not
    md = (folder / "table.md").read_text()
    key, folded = md.split("<details><summary>Notes (")[0], md.split("<details><summary>Notes (")[1]
    assert "Key: (+Δ): vs the same backbone's baseline; †: significant" in key
    assert folded.startswith(f"{len(first.notes)})</summary>\n") and "</details>" in folded
    from benchmark.report.markdown import escape as md_escape

    for note in first.notes:  # nothing deleted: every note, in full, behind the click
        assert md_escape(note) in folded and md_escape(note) not in key
    page = (folder / "index.html").read_text()
    html = table_html(first, None)
    assert '<p class="legend">Key: (+Δ): vs the same backbone&#x27;s baseline; ' in html
    notes_block = html.split('<details class="notes">')[1]
    assert notes_block.count("<li>") == len(first.notes) and html.count("<li>") == len(first.notes)
    assert '<details class="notes"><summary>Notes (' in page
    closing = headline(folder)
    assert (
        closing.startswith("## hand: nDCG@10")
        and "Key: (+Δ)" in closing
        and closing.endswith(f"Notes: {folder / 'table.md'}")
    )
    assert "Holm-corrected over the table's" not in closing  # the notes stay in the file


def _pdflatex(folder: Path, tmp: Path) -> str:
    """pdflatex's log for a document that \\inputs the folder's table.tex and table-notes.tex ('' without pdflatex)."""
    import subprocess

    if shutil.which("pdflatex") is None:
        return ""
    work = tmp / f"tex-{folder.name}"
    work.mkdir()
    for name in ("table.tex", "table-notes.tex"):
        shutil.copy(folder / name, work / name)
    (work / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
        "\\input{table.tex}\n\\clearpage\n\\input{table-notes.tex}\n\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def test_latex_short_captions_notes_apart_and_pure_ascii(tmp_path):
    """table.tex: each table under a caption of its title and key; table-notes.tex: every note, referring to
    its table. Both pure ASCII, every symbol a command (a raw √ or ρ stops pdflatex), and pdflatex compiles them."""
    from benchmark.report.latex import escape
    from benchmark.report.table import suite_tables

    pq: dict = {}
    judged = [
        run("ref", D1, [0.8, 0.7], backbone="bert-x", perquery=pq, query_nnz=10.0, doc_nnz=100.0, vocab_size=100),
        run(
            "mb",
            D1,
            [0.2, 0.3],
            backbone="mb",
            perquery=pq,
            query_nnz=90.0,
            doc_nnz=99.0,
            vocab_size=100,
            train_id="t-mb",
            outcome="collapsed",
            outcome_reason="degenerate_support",
            outcome_step=24,
            outcome_detail="10.9% of queries have <= 2 indexed terms (>= 5%) for 3 logging steps",
        ),
    ]
    results = suite(
        paper_results().conditions + judged,
        {**paper_results().perquery, **pq},
        table={"averages": [{"name": "avg", "datasets": [D1, D2]}], "reference": "bert-x"},
    )
    folder = publish(results, tmp_path / "hand")
    tex, notes = (folder / "table.tex").read_text(), (folder / "table-notes.tex").read_text()
    assert tex.isascii() and notes.isascii()
    tables = suite_tables(read_results(folder))
    assert r"\caption{hand: nDCG@10. (+$\Delta$): vs the same backbone's baseline. $^\dagger$: significant" in tex
    assert r"\label{tab:hand-ndcg-10}" in tex and r"\paragraph{Notes to Table~\ref{tab:hand-ndcg-10}.}" in notes
    assert r"\textless{}= 2 indexed terms (\textgreater{}= 5\%)" in notes  # OT1 would set < and > as ¡ and ¿
    for note in tables[0].notes:
        assert escape(note).replace("*:", "$^*$:") in notes
    assert (
        escape("√ρ_ref · |V| … Touché ≥ ×")
        == r"$\surd$$\rho$\_ref $\cdot$ \textbar{}V\textbar{} \ldots{} Touch\'{e} $\geq$ $\times$"
    )
    assert escape("⁂").isascii()  # a symbol without a command still compiles: by its name
    _pdflatex(folder, tmp_path)


@pytest.mark.parametrize("suite_name", ["paper-mini", "scale-sweep"])
def test_committed_latex_compiles(suite_name, tmp_path):
    folder = ROOT / "results" / suite_name
    if not (folder / "table-notes.tex").is_file():
        pytest.skip(f"results/{suite_name} has no table-notes.tex committed")
    assert (folder / "table.tex").read_text().isascii() and (folder / "table-notes.tex").read_text().isascii()
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)")
    _pdflatex(folder, tmp_path)


# --------------------------------------------------------------------------- efficiency beside effectiveness


def _stage_log(**rows: tuple[str, float, int]) -> Callable[[Path], None]:
    """An ``extra`` for publish: a stages.csv of (kind, seconds, bytes) per stage id, in the given order."""

    def write(staging: Path) -> None:
        lines = ["stage,id,seconds,bytes,this_run"] + [
            f"{k},{i},{sec:.2f},{b},computed" for i, (k, sec, b) in rows.items()
        ]
        (staging / "stages.csv").write_text("\n".join(lines) + "\n")

    return write


def test_a_run_file_row_has_no_search_time():
    """A --run row's stage reads a TREC file: its seconds are no search's, so it gets no ms/q (the page once
    showed one), while BM25 beside it keeps its own."""
    from benchmark.report.results import efficiency

    pq: dict = {}
    conds = [
        run("b", D1, [0.4, 0.6], system="bm25", perquery=pq, search_id="search-b"),
        run("mine", D1, [0.3, 0.5], system="run", perquery=pq, search_id="runfile-m"),
    ]
    results = suite(conds, pq)
    results.stage_log = {
        "search-b": {"stage": "search", "seconds": 0.5, "bytes": 10},
        "runfile-m": {"stage": "runfile", "seconds": 0.2, "bytes": 10},
    }
    got = efficiency(results)
    assert got["b"]["search_ms"] == 250.0 and got["mine"]["search_ms"] is None  # 0.5 s over 2 queries


def test_efficiency_beside_effectiveness_from_the_stage_log(tmp_path):
    """ms per query (the search stage's seconds over its queries) and the index's size (its bytes) from
    stages.csv, beside FLOPS and non-zeros; an index recorded with the results wins over the log's order,
    and a search whose index the log cannot tell gets none (never a guess)."""
    pq: dict = {}
    conds = [
        run("bm25", D1, [0.5, 0.5], system="bm25", perquery=pq, search_id="search-b"),
        run(
            "base",
            D1,
            [0.4, 0.6],
            perquery=pq,
            search_id="search-s1",
            index_id="index-s1",
            FLOPS=2.0,
            query_nnz=10.0,
            doc_nnz=50.0,
        ),
        run(
            "x4",
            D1,
            [0.5, 0.7],
            variant="x4",
            factor="4",
            perquery=pq,
            search_id="search-s2",
            FLOPS=1.0,
            query_nnz=5.0,
            doc_nnz=25.0,
        ),
        run(
            "x16",
            D1,
            [0.1, 0.3],
            variant="x16",
            factor="16",
            perquery=pq,
            search_id="search-s3",
            FLOPS=0.5,
            query_nnz=2.0,
            doc_nnz=10.0,
        ),
    ]
    log = _stage_log(
        **{
            "index-b": ("index", 3.0, 2**20),
            "search-b": ("search", 0.5, 10),
            "index-s1": ("index", 9.0, 2 * 2**20),
            "index-other": ("index", 1.0, 7),
            "search-s1": ("search", 1.0, 10),
            "index-s2": ("index", 4.0, 3 * 2**20),
            "queries-s2": ("queries", 2.0, 99),
            "search-s2": ("search", 0.25, 10),
            "search-s3": ("search", 0.1, 10),
        }
    )  # s3 searched an index logged before s2: unknown
    folder = publish(suite(conds, pq), tmp_path / "hand", extra=log)
    assert table_lines(folder) == [
        "| nDCG@10 | alpha | FLOPS | q nnz | d nnz | ms/q | index MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
        "| BM25 | 0.5000 |  |  |  | 250.0 | 1.00 |",  # 0.5 s over 2 queries; 2**20 bytes
        "| SPLADE bb baseline | 0.5000 | 2.000 | 10.0 | 50.0 | 500.0 | 2.00 |",  # the recorded index, not index-other
        "| SPLADE bb x4 | **0.6000** (+0.1000)† | 1.000 | 5.0 | 25.0 | 125.0 | 3.00 |",  # from the order: index-s2
        "| SPLADE bb x16 [lost 60 % vs baseline] | 0.2000 (-0.3000)† | 0.500 | 2.0 | 10.0 | 50.0 |  |",
    ]
    with open(folder / "metrics.csv") as fh:
        metrics = {r["variant"] or r["system"]: r for r in csv.DictReader(fh)}
    assert (metrics["bm25"]["search_ms"], metrics["bm25"]["index_bytes"]) == ("250.0", str(2**20))
    assert (metrics["x16"]["search_ms"], metrics["x16"]["index_bytes"]) == ("50.0", "")
    md = (folder / "table.md").read_text()
    assert "ms/q: search time per query; index MiB: index size" in md
    assert "ms/q: the search stage's wall time over its queries, in milliseconds" in md
    page = (folder / "index.html").read_text()
    assert '<span data-field="search_ms">125.0</span>' in page and '<span data-field="index_bytes">3.00</span>' in page
    assert report_main(["--results-dir", str(folder.parent)]) == 0  # a rebuild reads the same log
    assert table_lines(folder)[2] == "| BM25 | 0.5000 |  |  |  | 250.0 | 1.00 |"


@pytest.mark.parametrize("name", ["smoke", "paper-mini", "scale-sweep"])
def test_the_stage_log_order_names_each_search_its_index(name):
    """Results written before index ids were recorded find a search's index by the stage log's order (the
    plan's, parents first): on every packaged plan that order gives each search its own index parent."""
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.report.results import index_ids
    from benchmark.suites import load_suite

    plan = build_plan(load_suite(name), Options())
    log = {s.id: {"stage": s.kind.name, "seconds": 1.0, "bytes": 1} for s in plan.stages()}
    found = index_ids(SuiteResults(suite=name, measures=[], conditions=[], stage_log=log))
    truth = {s.id: s.parents["index"].id for s in plan.stages() if s.kind.name == "search"}
    assert {k: truth[k] for k in found} == found  # never a wrong index
    evaluated = {c.search.id for c in plan.conditions}
    assert evaluated <= set(found) and len(evaluated) > 2  # every scored system's
    # what is left out: searches of an index an earlier search already read (smoke mines negatives with
    # the BM25 index of the whole corpus it also evaluates on)
    searches = [s for s in plan.stages() if s.kind.name == "search"]
    shared = {s.id for i, s in enumerate(searches) if any(truth[s.id] == truth[t.id] for t in searches[:i])}
    assert set(truth) - set(found) == shared


# --------------------------------------------------------------------------- checks, exports and plots on the page


def test_expected_scores_are_checked_on_the_page(tmp_path):
    """The suite's [[expected]] entries recorded with the results are checked on the page as --check checks a
    run: [OK] / [OKish] / [FAIL] with what was expected and got, and the command beside each result."""
    from benchmark.report.check import check_results

    results = paper_results()
    results.expected = [
        {"dataset": D1, "system": "bm25", "measure": MEASURE, "value": 0.45},
        {
            "dataset": D1,
            "system": "splade",
            "backbone": "bb",
            "variant": "rescaled",
            "measure": MEASURE,
            "value": 0.6,
            "tolerance": 0.01,
            "okish": 0.02,
        },  # got 0.6150: OKish
        {
            "dataset": D2,
            "system": "splade",
            "backbone": "bb",
            "variant": "baseline",
            "measure": MEASURE,
            "value": 0.5,
            "tolerance": 0.01,
            "source": "made up",
        },  # got 0.2000: FAIL
        {"dataset": D1, "system": "splade", "backbone": "bb2", "variant": "baseline", "collapsed": True},
        {"dataset": D1, "system": "bm25", "measure": MEASURE, "value": 0.1, "max_docs": 600},  # another subset
        {
            "dataset": D1,
            "system": "published",
            "backbone": "naver/splade-v3",
            "measure": MEASURE,
            "value": 0.7,
        },  # not run
    ]
    folder = publish(results, tmp_path / "hand")
    checks, skipped, source = check_results(read_results(folder))
    assert [(c.verdict.verdict, c.verdict.detail, c.verdict.got) for c in checks] == [
        ("OK", "expected 0.4500 (±0), got 0.4500", "0.4500"),
        ("OKish", "expected 0.6000 (±0.01, okish ±0.02), got 0.6150", "0.6150"),
        ("FAIL", "expected 0.5000 (±0.01, okish ±0.02), got 0.2000 [made up]", "0.2000"),
        ("OK", "collapsed, as expected", "collapsed"),
    ]
    assert (skipped, source) == (2, "the suite's, recorded with these results")
    assert checks[1].commands == ("python -m benchmark.run --suite hand  # bb-resc-alpha",)
    page = (folder / "index.html").read_text()
    section = page.split('<h2 id="checks">Regression checks</h2>')[1].split("<h2")[0]
    assert "2 OK, 1 OKish, 1 FAIL; 2 entries for other subsets, datasets or models not checked" in section
    assert [v for v in re.findall(r'data-field="verdict">\[(\w+)\]', section)] == ["OK", "OKish", "FAIL", "OK"]
    assert "# bb-resc-alpha" in section and section.count('<td class="cmd">') == 4
    assert json.loads((folder / "results.json").read_text())["expected"][0]["system"] == "bm25"


def test_sweep_plot_tells_the_readings_apart_and_its_legends_cover_no_line(tmp_path):
    """The paper's operation (x<f>) and the constant multiplier (x<f>-projection) and any other arm each get
    their own marker; every legend sits outside its axes, so no line or point hides under it."""
    from benchmark.report.plots import sweep_figure
    from benchmark.report.table import suite_tables

    pq: dict = {}
    arms = [
        ("baseline", "1", "", [0.25, 0.75]),
        ("x0.25", "0.25", "untie", [0.275, 0.825]),
        ("x4", "4", "untie", [0.15, 0.45]),
        ("x0.25-projection", "0.25", "projection", [0.3, 0.8]),
        ("x4-projection", "4", "projection", [0.1, 0.5]),
        ("x0.25-flops", "0.25", "head-norm", [0.2, 0.7]),
    ]
    conds = [
        run(v, D1, vals, variant=v, factor=f, method=m, FLOPS=1.0 / float(f), query_nnz=10.0, doc_nnz=40.0, perquery=pq)
        for v, f, m, vals in arms
    ]
    results = suite(conds, pq)
    fig = sweep_figure(suite_tables(results)[0], results)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    score, low = fig.axes
    handles, labels = score.get_legend_handles_labels()
    markers = {label: (h.lines[0] if hasattr(h, "lines") else h).get_marker() for h, label in zip(handles, labels)}
    assert markers == {  # each line says what it is, in words, not only by its method's name
        "bb x<f>: untied copy, extension": "o",
        "bb x<f>-projection: multiplier, extension": "s",
        "bb x<f>-flops: head LayerNorm, extension, FLOPS-matched λ": "D",
        "bb: baseline (unscaled)": "None",
    }
    # the baseline is ×1 of every reading: each line passes through it, in the score and the FLOPS panels
    for h, label in zip(handles, labels):
        if "x<f>" in label:
            assert 1.0 in list((h.lines[0] if hasattr(h, "lines") else h).get_xdata()), label
    for line in low.get_lines():
        if len(line.get_xdata()):
            assert 1.0 in list(line.get_xdata())
    for ax in fig.axes:
        box, legend = ax.get_window_extent(renderer), ax.get_legend().get_window_extent(renderer)
        assert legend.x0 >= box.x1, "the legend overlaps the plot"
    assert [t.get_text() for t in low.get_legend().get_texts()][:3] == ["FLOPS", "q nnz", "d nnz"]
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_averages_plot_has_bm25_and_outcome_marks(tmp_path):
    """Baseline vs. rescaled per backbone with BM25's average as a line, a collapsed run's bar marked and a
    run stopped at its collapse as a ✗: each in the legend."""
    results = paper_results()
    folder = publish(results, tmp_path / "hand")
    assert (folder / "averages.png").is_file()
    alt = re.search(r'alt="(averages.png: legend [^"]*)"', (folder / "index.html").read_text()).group(1)
    assert alt == (
        "averages.png: legend baseline; rescaled; BM25; collapsed (stopped, no score); collapsed in training "
        "(scored: trained to its end); * leaves out columns without a score"
    )
