"""Significance (paired t-test + Holm) on hand-computed numbers, the paper-style tables (Δ, bold,
dagger, collapsed), and regenerating every table from runs/ without recomputing anything."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from benchmark.report import main as report_main
from benchmark.report import render
from benchmark.significance import holm, paired_ttest

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


# --------------------------------------------------------------------------- a hand-made runs/ folder

D1, D2 = "beir/alpha/test", "beir/beta/test"
PERQUERY = {  # evaluate id → dataset → per-query nDCG@10 (means are the aggregate metrics)
    "bm25": {D1: [0.45, 0.45, 0.45, 0.45], D2: [0.3, 0.3, 0.3]},
    "bb-base": {D1: [0.2, 0.4, 0.6, 0.8], D2: [0.1, 0.2, 0.3]},
    "bb-resc": {D1: [0.3, 0.51, 0.72, 0.93], D2: [0.2, 0.4, 0.6]},  # Δ 0.10..0.13 / 0.1, 0.2, 0.3
    "bb2-resc": {D1: [0.7, 0.7, 0.7, 0.7], D2: [0.1, 0.1, 0.1]},
    "bb3-base": {D1: [0.6, 0.6, 0.6, 0.6]},
}
ROWS = [  # (eval key, system, backbone, variant, status per dataset)
    ("bm25", "bm25", "", "", {D1: "ok", D2: "ok"}),
    ("bb-base", "splade", "bb", "baseline", {D1: "ok", D2: "ok"}),
    ("bb-resc", "splade", "bb", "rescaled", {D1: "ok", D2: "ok"}),
    ("bb2-base", "splade", "bb2", "baseline", {D1: "collapsed", D2: "collapsed"}),
    ("bb2-resc", "splade", "bb2", "rescaled", {D1: "ok", D2: "ok"}),
    ("bb3-base", "splade", "bb3", "baseline", {D1: "ok", D2: "collapsed"}),
]


def _write_eval(runs: Path, eval_id: str, values: list[float]) -> None:
    folder = runs / "evaluate" / eval_id
    folder.mkdir(parents=True)
    meta = {"id": eval_id, "kind": "evaluate", "status": "complete",
            "record": {"metrics": {"nDCG@10": sum(values) / len(values)}, "queries": len(values)}}
    (folder / "config.json").write_text(json.dumps(meta))
    lines = ["measure\tquery_id\tvalue"] + [f"nDCG@10\tq{i}\t{v!r}" for i, v in enumerate(values)]
    (folder / "perquery.tsv").write_text("\n".join(lines) + "\n")


def make_results(tmp: Path) -> tuple[Path, Path, dict]:
    runs, results = tmp / "runs", tmp / "results" / "hand"
    conditions = []
    for key, system, backbone, variant, status in ROWS:
        for dataset in (D1, D2):
            eval_id = f"evaluate-{key}-{dataset.split('/')[1]}"
            if status[dataset] == "ok":
                _write_eval(runs, eval_id, PERQUERY[key][dataset])
            conditions.append({"dataset": dataset, "system": system, "backbone": backbone, "variant": variant,
                               "factor": "1" if variant == "baseline" else "", "trained": system == "splade",
                               "status": status[dataset], "evaluate_id": eval_id, "train_id": ""})
    manifest = {"suite": "hand", "runs_dir": str(runs), "measures": ["nDCG@10"], "columns": [D1, D2], "groups": {},
                "table": {"measure": "nDCG@10", "averages": [{"name": "avg", "datasets": [D1, D2]}]},
                "conditions": conditions}
    results.mkdir(parents=True)
    (results / "manifest.json").write_text(json.dumps(manifest))
    return runs, results, manifest


def test_table_delta_bold_dagger_collapsed(tmp_path):
    runs, results, manifest = make_results(tmp_path)
    render("hand", manifest, runs, results)
    md = (results / "table.md").read_text()
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert lines == [
        "| nDCG@10 | alpha | beta | avg |",
        "|---|---:|---:|---:|",
        "| BM25 | 0.4500 | 0.3000 | 0.3750 |",
        "| SPLADE bb baseline | 0.5000 | 0.2000 | 0.3500 |",
        # d1: Δ 0.10, 0.11, 0.12, 0.13 (tiny variance) is significant after Holm; d2 (p = 0.074) is not
        "| SPLADE bb rescaled | 0.6150 (+0.1150)† | **0.4000** (+0.2000) | **0.5075** (+0.1575) |",
        "| SPLADE bb2 baseline | collapsed | collapsed | collapsed |",
        "| SPLADE bb2 rescaled | **0.7000** | 0.1000 | 0.4000 |",  # no Δ: its baseline collapsed
        "| SPLADE bb3 baseline | 0.6000 | collapsed | 0.6000* |",  # the average leaves the collapse out
    ]
    assert "never counted as 0, and is excluded from averages" in md
    assert "Holm-corrected over the row's 2 dataset(s)" in md

    with open(results / "table.csv") as fh:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(fh)}
    d1, d2 = cells[("SPLADE bb rescaled", D1)], cells[("SPLADE bb rescaled", D2)]
    p1 = 2 * (1 - t_cdf_df3(0.115 / (math.sqrt(0.0005 / 3) / 2)))  # diffs 0.10..0.13: sd sqrt(0.0005/3)
    p2 = 1 - math.sqrt(6 / 7)  # diffs 0.1, 0.2, 0.3: t = 2 sqrt(3) on 2 df
    assert float(d1["p_value"]) == pytest.approx(p1, rel=1e-5)
    assert float(d2["p_value"]) == pytest.approx(p2, rel=1e-5)
    assert float(d1["p_holm"]) == pytest.approx(2 * p1, rel=1e-5)  # the smaller p, times 2
    assert float(d2["p_holm"]) == pytest.approx(p2, rel=1e-5)  # max(2 p1, 1 × p2)
    assert (d1["significant"], d2["significant"]) == ("True", "False")
    collapsed = cells[("SPLADE bb2 baseline", D1)]
    assert (collapsed["status"], collapsed["value"]) == ("collapsed", "")  # never 0
    avg = cells[("SPLADE bb3 baseline", "avg")]
    assert (avg["value"], avg["partial"], avg["best"]) == ("0.600000", "True", "False")

    tex = (results / "table.tex").read_text()
    assert r"SPLADE bb rescaled & 0.6150\,{\scriptsize(+0.1150)}$^\dagger$ & \textbf{0.4000}\,{\scriptsize(+0.2000)}" in tex
    assert r"SPLADE bb2 baseline & \textit{collapsed} & \textit{collapsed} & \textit{collapsed} \\" in tex
    assert r"\begin{tabular}{lrrr}" in tex and r"\bottomrule" in tex


def test_report_regenerates_from_runs_without_recomputing(tmp_path, capsys):
    runs, results, _ = make_results(tmp_path)
    assert report_main(["--results-dir", str(results.parent)]) == 0
    first = {name: (results / name).read_bytes() for name in ("table.md", "table.csv", "table.tex", "metrics.csv")}
    for name in first:
        (results / name).unlink()
    before = sorted(p.relative_to(runs) for p in runs.rglob("*"))
    assert report_main(["--results-dir", str(results.parent), "--suite", "hand", "--runs-dir", str(runs)]) == 0
    assert {name: (results / name).read_bytes() for name in first} == first
    assert sorted(p.relative_to(runs) for p in runs.rglob("*")) == before  # runs/ untouched
    assert "regenerated" in capsys.readouterr().out

    assert report_main(["--results-dir", str(results.parent), "--suite", "nope"]) == 2
    assert "no manifest.json for suite(s) nope" in capsys.readouterr().err
    assert report_main(["--results-dir", str(tmp_path / "empty")]) == 2


def test_sweep_plot_marks_collapsed_runs(tmp_path):
    """The scale sweep: score vs. factor on a log2 axis; a collapsed factor is drawn, not dropped."""
    runs, results = tmp_path / "runs", tmp_path / "results" / "sweep"
    conditions = []
    for variant, factor, status, score in [("baseline", "1", "ok", 0.5), ("x0.25", "0.25", "ok", 0.55),
                                           ("x1", "1", "ok", 0.5), ("x4", "4", "ok", 0.3), ("x16", "16", "collapsed", None)]:
        eval_id = f"evaluate-{variant}"
        if status == "ok":  # differences 0.025, 0.075 vs. the baseline: t = 2 on 1 df, p = 0.295
            _write_eval(runs, eval_id, [score * 0.5, score * 1.5])
        conditions.append({"dataset": D1, "system": "splade", "backbone": "tiny", "variant": variant, "factor": factor,
                           "trained": True, "status": status, "evaluate_id": eval_id, "train_id": ""})
    manifest = {"suite": "sweep", "runs_dir": str(runs), "measures": ["nDCG@10"], "conditions": conditions}
    render("sweep", manifest, runs, results)
    png = (results / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    md = (results / "table.md").read_text()
    assert "| SPLADE tiny x16 | collapsed |" in md
    assert "| SPLADE tiny x0.25 | **0.5500** (+0.0500) |" in md
    assert not (results / "averages.png").exists()  # one backbone: nothing to compare across


def test_report_on_the_pipeline_fixture(untrained_splade):
    """Regenerating the real pipeline's results rewrites the same tables, reading runs/ only."""
    results = untrained_splade["results"]
    before = (results / "table.md").read_text()
    assert "| BM25 | **0.7805** |" in before
    assert "| SPLADE bert-tiny baseline (untrained) | 0.7314 |" in before
    (results / "table.md").unlink()
    assert report_main(["--results-dir", str(results.parent), "--suite", "mini"]) == 0
    assert (results / "table.md").read_text() == before
