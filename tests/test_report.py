"""Significance (paired t-test + Holm) on hand-computed numbers; the paper-style tables (Δ, bold,
dagger, outcomes, seeds, FLOPS beside the sweep, subsets); results folders that rebuild every table
from their own files, hold no machine path, and refresh from a runs folder only when asked."""

from __future__ import annotations

import csv
import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from benchmark.plan import Condition
from benchmark.report import main as report_main
from benchmark.report import publish, read_results
from benchmark.report.results import ConditionResult, SuiteResults, collect
from benchmark.significance import holm, paired_ttest
from benchmark.stage import Stage, StageKind, Store


def _kind(name: str) -> type[StageKind]:
    """A stage kind that takes any config and any parents (the report reads only records and ids)."""
    return type(name.title(), (StageKind,), {"name": name, "VERSION": 1,
                                             "optional_parents": ("init", "index", "source", "run")})


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


# --------------------------------------------------------------------------- hand-made results

D1, D2 = "beir/alpha/test", "beir/beta/test"
MEASURE = "nDCG@10"


def run(key: str, dataset: str, values: list[float] | None, system: str = "splade", backbone: str = "bb",
        variant: str = "baseline", seed: int | None = 1, perquery: dict | None = None, **extra) -> ConditionResult:
    """A condition scored ``values`` per query (their mean is the aggregate); None: not scored."""
    c = ConditionResult(key=key, dataset=dataset, system=system, backbone=backbone if system == "splade" else "",
                        variant=variant if system == "splade" else "", trained=system == "splade",
                        seed=seed if system == "splade" else None, command=f"python -m benchmark.run --suite hand  # {key}",
                        **extra)
    if values is not None:
        c.metrics = {MEASURE: sum(values) / len(values)}
        c.queries = len(values)
        if perquery is not None:
            perquery[key] = {MEASURE: {f"q{i}": v for i, v in enumerate(values)}}
    return c


def suite(conditions: list[ConditionResult], perquery: dict, **extra) -> SuiteResults:
    columns = list(dict.fromkeys(c.dataset for c in conditions))
    return SuiteResults(suite="hand", measures=[MEASURE], conditions=conditions, columns=columns,
                        table={"measure": MEASURE, **extra.pop("table", {})}, perquery=perquery, **extra)


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
        conds += [run(f"bm25-{short}", d, PERQUERY["bm25"][d], system="bm25", perquery=pq),
                  run(f"bb-base-{short}", d, PERQUERY["bb-base"][d], perquery=pq),
                  run(f"bb-resc-{short}", d, PERQUERY["bb-resc"][d], variant="rescaled", perquery=pq),
                  run(f"bb2-base-{short}", d, None, backbone="bb2", **stopped),
                  run(f"bb2-resc-{short}", d, PERQUERY["bb2-resc"][d], backbone="bb2", variant="rescaled", perquery=pq)]
    conds += [run("bb3-base-alpha", D1, PERQUERY["bb3-base"][D1], backbone="bb3", perquery=pq),
              run("bb3-base-beta", D2, None, backbone="bb3", outcome="collapsed", outcome_step=200, stopped_early=True)]
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
        "| SPLADE bb2 rescaled | **0.7000** | 0.1000 | 0.4000 |",  # no Δ: its baseline has no score
        "| SPLADE bb3 baseline [collapsed] | 0.6000 | collapsed (step 200) | 0.6000* |",  # the average leaves it out
    ]
    md = (folder / "table.md").read_text()
    assert "a run stopped at its collapse has no score and its cells read \"collapsed\" with the step, never 0" in md
    assert "Averages include every score shown, collapsed or degraded runs included; *: an average" in md
    assert "Holm-corrected over the row's 2 dataset(s)" in md
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
    collapsed = cells[("SPLADE bb2 baseline", D1)]
    assert (collapsed["status"], collapsed["value"], collapsed["collapse_steps"]) == ("collapsed", "", "step 300")
    avg = cells[("SPLADE bb3 baseline", "avg")]
    assert (avg["value"], avg["partial"], avg["best"]) == ("0.600000", "True", "False")

    tex = (folder / "table.tex").read_text()
    assert r"SPLADE bb rescaled & 0.6150\,{\scriptsize(+0.1150)}$^\dagger$ & \textbf{0.4000}\,{\scriptsize(+0.2000)}" in tex
    assert r"SPLADE bb2 baseline \textit{(collapsed)} & \textit{collapsed} (step 300) & \textit{collapsed} (step 300) & \textit{collapsed} \\" in tex
    assert r"\begin{tabular}{lrrr}" in tex and r"\bottomrule" in tex


def test_seeds_mean_sd_outcome_counts_and_seed_averaged_test(tmp_path):
    """Three seeds per row: seed mean ± sd, "1/3 collapsed", and the dagger from a paired t-test on
    per-query scores averaged over seeds (3 queries: closed-form p on 2 degrees of freedom)."""
    pq: dict = {}
    scored_collapse = {"outcome": "collapsed", "outcome_reason": "dense", "outcome_step": 250}
    conds = [
        run("b1", D1, [0.2, 0.4, 0.6], seed=1, perquery=pq), run("b2", D1, [0.4, 0.4, 0.4], seed=2, perquery=pq),
        run("b3", D1, [0.3, 0.4, 0.5], seed=3, perquery=pq),  # seed average per query: 0.3, 0.4, 0.5
        run("r1", D1, [0.4, 0.6, 0.8], variant="rescaled", seed=1, perquery=pq),
        run("r2", D1, [0.5, 0.7, 0.9], variant="rescaled", seed=2, perquery=pq, outcome="degraded",
            outcome_reason="dev_rr_dropped", outcome_step=400),
        run("r3", D1, [0.6, 0.5, 0.7], variant="rescaled", seed=3, perquery=pq, **scored_collapse),  # trained to its end
        run("s1", D1, [0.1, 0.2, 0.3], variant="x4", seed=1, perquery=pq),
        run("s2", D1, [0.3, 0.2, 0.1], variant="x4", seed=2, perquery=pq),
        run("s3", D1, None, variant="x4", seed=3, outcome="collapsed", outcome_step=120, stopped_early=True),
        *[run(f"z{s}", D1, None, variant="x16", seed=s, outcome="collapsed", outcome_step=100 * s, stopped_early=True)
          for s in (1, 2, 3)],
    ]
    folder = publish(suite(conds, pq, seeds=[1, 2, 3]), tmp_path / "hand")
    assert table_lines(folder)[2:] == [
        "| SPLADE bb baseline | 0.4000 ± 0.0000 |",
        # seed means 0.6, 0.7, 0.6; per-query seed averages 0.5, 0.6, 0.8 against 0.3, 0.4, 0.5: diffs 0.2, 0.2, 0.3
        "| SPLADE bb rescaled [1/3 collapsed, 1/3 degraded] | **0.6333** ± 0.0577 (+0.2333)† |",
        "| SPLADE bb x4 [1/3 collapsed] | 0.2000 ± 0.0000 (-0.2000) n=2/3 |",  # the stopped seed is left out
        "| SPLADE bb x16 [3/3 collapsed] | collapsed (steps 100–300) |",
    ]
    cells = cells_csv(folder)
    rescaled = cells[("SPLADE bb rescaled", D1)]
    # diffs 0.2, 0.2, 0.3: mean 0.7/3, sd 1/sqrt(300), t = 7 on 2 df (a t-test over 9 seed×query pairs would differ)
    assert float(rescaled["p_value"]) == pytest.approx(2 * (1 - t_cdf_df2(7.0)), rel=1e-5)  # 6 significant digits in the csv
    assert (rescaled["seeds"], rescaled["of"], rescaled["outcomes"]) == ("3", "3", "1/3 collapsed, 1/3 degraded")
    x4 = cells[("SPLADE bb x4", D1)]
    assert float(x4["p_value"]) == pytest.approx(1 - math.sqrt(6 / 7), rel=1e-5)  # diffs -0.1, -0.2, -0.3: t = -2 sqrt(3)
    assert x4["significant"] == "False"
    md = (folder / "table.md").read_text()
    assert "SPLADE bb rescaled, seed 3: collapsed at step 250 (dense), trained to its end and scored." in md
    assert "SPLADE bb rescaled, seed 2: degraded at step 400 (dev_rr_dropped)." in md
    assert "±: sample standard deviation over seeds." in md and "Seeds: 1, 2, 3." in md

    with open(folder / "metrics.csv") as fh:
        metrics = {(r["variant"], r["seed"]): r for r in csv.DictReader(fh)}
    assert metrics[("rescaled", "3")]["outcome"] == "collapsed" and metrics[("rescaled", "3")]["value"] == repr(0.6)
    assert metrics[("x4", "3")]["value"] == "" and metrics[("x4", "3")]["outcome_step"] == "120"  # never 0


def test_sweep_table_shows_flops_and_nonzeros_and_plot(tmp_path):
    """The scale sweep: FLOPS and non-zeros beside each arm's score; score and FLOPS vs. factor on a log2 axis."""
    pq: dict = {}
    arms = [("baseline", "1", [0.25, 0.75], 2.0, 30.0, 80.0), ("x0.25", "0.25", [0.275, 0.825], 6.5, 137.0, 304.0),
            ("x1", "1", [0.25, 0.75], 2.0, 30.0, 80.0), ("x4", "4", [0.15, 0.45], 0.5, 4.0, 20.0)]
    conds = [run("bm25", D1, [0.5, 0.5], system="bm25", perquery=pq)]
    conds += [run(v, D1, vals, variant=v, factor=f, FLOPS=fl, query_nnz=q, doc_nnz=d, perquery=pq)
              for v, f, vals, fl, q, d in arms]
    conds.append(run("x16", D1, None, variant="x16", factor="16", outcome="collapsed", outcome_step=50, stopped_early=True))
    folder = publish(suite(conds, pq), tmp_path / "sweep")
    assert table_lines(folder) == [
        "| nDCG@10 | alpha | FLOPS | q nnz | d nnz |",
        "|---|---:|---:|---:|---:|",
        "| BM25 | 0.5000 |  |  |  |",
        "| SPLADE bb baseline | 0.5000 | 2.000 | 30.0 | 80.0 |",
        "| SPLADE bb x0.25 | **0.5500** (+0.0500) | 6.500 | 137.0 | 304.0 |",
        "| SPLADE bb x1 | 0.5000 (±0.0000) | 2.000 | 30.0 | 80.0 |",
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
    folder = publish(suite(conds, pq, subset="max-docs=600,max-queries=30", max_docs=600, max_queries=30),
                     tmp_path / "hand@max-docs=600,max-queries=30")
    md = (folder / "table.md").read_text()
    assert md.startswith("# hand @ max-docs=600,max-queries=30\n")
    assert "## hand @ max-docs=600,max-queries=30: nDCG@10" in md
    assert "Subset: max-docs=600,max-queries=30 (a narrowed run, not the suite's full datasets)." in md
    assert "hand @ max-docs=600,max-queries=30" in (folder / "index.html").read_text()
    declared = publish(suite(conds, pq, max_docs=2000), tmp_path / "declared")
    assert "Data: 2000 documents per corpus (judged documents kept), as the suite declares." in (declared / "table.md").read_text()


# --------------------------------------------------------------------------- results folders


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rebuild_from_results_alone_one_line_per_broken_folder(tmp_path, capsys):
    results = tmp_path / "results"
    folder = publish(paper_results(), results / "hand")
    first = _files(folder)
    assert {"results.json", "perquery.csv.gz", "metrics.csv", "table.md", "table.csv", "table.tex", "index.html"} <= set(first)
    for name in ("metrics.csv", "table.md", "table.csv", "table.tex", "index.html"):
        (folder / name).unlink()
    (results / "broken").mkdir()
    (results / "broken" / "results.json").write_text("{not json")
    (results / "legacy").mkdir()
    (results / "legacy" / "manifest.json").write_text('{"runs_dir": "/elsewhere/runs"}')
    (results / "perf").mkdir()
    (results / "perf" / "perf.md").write_text("not a suite")

    assert report_main(["--results-dir", str(results)]) == 1  # two folders could not be rebuilt
    out, err = capsys.readouterr()
    assert _files(folder) == first  # every file again, byte for byte, from results.json and perquery.csv.gz alone
    assert f"rebuilt {folder}" in out and f"skipped {results / 'perf'}: no results.json" in out
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err
    assert lines[0].startswith(f"failed {results / 'broken'}: ") and "not valid JSON" in lines[0]
    assert lines[1].startswith(f"skipped {results / 'legacy'}: earlier format") and "--refresh legacy" in lines[1]

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
        "x4": {"outcome": "collapsed", "outcome_reason": "dense", "outcome_step": 800, "stopped_early": False,
               "outcome_detail": f"dense at {runs}/train", "seed": 7},
        "x16": {"status": "collapsed", "collapse_reason": "zero", "collapse_step": 20, "seed": 7},
    }
    for variant, record in records.items():
        backbone = S("backbone", {"v": variant})
        _stage(store, backbone, {"factor": float(variant[1:]), "head_norm_before": 10.0, "head_norm_after": 10.0 * float(variant[1:]),
                                 "source": local})
        train = S("train", {"v": variant}, {"init": backbone})
        _stage(store, train, record, {"telemetry.png": png})
        search = S("search", {"v": variant}, {"index": S("index", {"v": variant}, {"source": train})})
        _stage(store, search, {"FLOPS": 1.5, "doc_nnz": 90.0, "query_nnz": 20.0})
        evaluate = S("evaluate", {"v": variant}, {"run": search})
        _stage(store, evaluate, {"metrics": {MEASURE: 0.25}, "queries": 2},
               {"perquery.tsv": f"measure\tquery_id\tvalue\n{MEASURE}\tq1\t0.0\n{MEASURE}\tq2\t0.5\n"})
        conditions.append(Condition(local, "splade", "bb", variant, variant[1:], trained=True, evaluate=evaluate,
                                    train=train, command=f"python -m benchmark.run --suite {tmp_path}/s.toml "
                                                         f"--datasets {local} --runs-dir {runs}"))

    class Plan:  # what collect reads of a plan
        suite = type("S", (), {"name": "hand", "description": "", "table": {"measure": MEASURE}})()
        measures, dataset_measures, columns, groups = [MEASURE], {local: [MEASURE]}, [local], {}
        max_docs, max_queries, seeds, subset = None, None, [7], None

    Plan.conditions = conditions
    results = collect(Plan(), store)
    x4, x16 = results.conditions
    assert (x4.outcome, x4.stopped_early, x4.outcome_step, x4.metrics, x4.seed) == ("collapsed", False, 800, {MEASURE: 0.25}, 7)
    assert (x16.outcome, x16.stopped_early, x16.outcome_step, x16.metrics) == ("collapsed", True, 20, {})  # earlier format
    assert (x4.FLOPS, x4.doc_nnz, x4.query_nnz, x4.scale, x4.head_norm_after) == (1.5, 90.0, 20.0, 4.0, 40.0)
    assert x4.dataset == "local:myset" and results.perquery[x4.key] == {MEASURE: {"q1": 0.0, "q2": 0.5}}
    assert x4.command == "python -m benchmark.run --suite s.toml --datasets $DATA/myset --runs-dir runs"

    results_dir = tmp_path / "results"
    folder = publish(results, results_dir / "hand")
    assert (folder / x4.telemetry).read_bytes() == png
    assert table_lines(folder)[2:] == ["| SPLADE bb x4 [collapsed] | 0.2500 | 1.500 | 20.0 | 90.0 |",
                                       "| SPLADE bb x16 [collapsed] | collapsed (step 20) |  |  |  |"]
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
    shutil.rmtree(runs / "evaluate")
    assert report_main(["--results-dir", str(results_dir), "--refresh", "hand", "--runs-dir", str(runs)]) == 1
    err = capsys.readouterr().err
    assert "1 of 2 scored condition(s) of hand are not in" in err and "nothing written" in err
    assert _files(folder) == first


def test_legacy_results_refresh_from_runs(tmp_path):
    """An earlier-format folder (manifest.json with a runs_dir) becomes a self-contained one by --refresh."""
    runs = tmp_path / "runs"
    store = Store(runs, log=lambda line: None)
    evaluate = S("evaluate", {"x": 1})
    _stage(store, evaluate, {"metrics": {MEASURE: 0.75}, "queries": 2},
           {"perquery.tsv": f"measure\tquery_id\tvalue\n{MEASURE}\tq1\t0.5\n{MEASURE}\tq2\t1.0\n"})
    folder = tmp_path / "results" / "old"
    folder.mkdir(parents=True)
    manifest = {"suite": "old", "runs_dir": str(runs), "measures": [MEASURE], "columns": [D1],
                "conditions": [{"dataset": D1, "system": "bm25", "backbone": "", "variant": "", "factor": "",
                                "trained": False, "status": "ok", "evaluate_id": evaluate.id, "train_id": ""}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "metrics.csv").write_text(f"evaluate_id,measure,value\n{evaluate.id},{MEASURE},0.7500\n")
    assert report_main(["--results-dir", str(tmp_path / "results"), "--refresh", "old", "--runs-dir", str(runs)]) == 0
    assert not (folder / "manifest.json").exists()
    results = read_results(folder)
    assert results.conditions[0].metrics == {MEASURE: 0.75}
    assert results.perquery[evaluate.id] == {MEASURE: {"q1": 0.5, "q2": 1.0}}


def test_report_on_the_pipeline_fixture(untrained_splade, tmp_path):
    """A real run's folder: the slice its suite declares in the footnotes, rebuilt identically from a copy
    that has no runs folder beside it, and refreshed identically from the runs folder."""
    results = untrained_splade["results"]
    before = (results / "table.md").read_text()
    assert "## mini: nDCG@10" in before
    assert "600 documents per corpus (judged documents kept) and 30 queries per dataset, as the suite declares" in before
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
    assert report_main(["--results-dir", str(copy), "--refresh", "mini", "--runs-dir", str(untrained_splade["runs"])]) == 0
    assert _files(copy / "mini") == files


@pytest.mark.parametrize("suite", ["smoke", "scale-sweep"])
def test_committed_results_rebuild_identically(suite, tmp_path):
    """The committed tables, page and metrics.csv are what their own results.json and perquery.csv.gz give."""
    committed = Path(__file__).resolve().parents[1] / "results" / suite
    if not (committed / "results.json").is_file():
        pytest.skip(f"results/{suite} is not committed in the self-contained format")
    copy = tmp_path / "results" / suite
    shutil.copytree(committed, copy)
    assert report_main(["--results-dir", str(tmp_path / "results")]) == 0
    for name in ("metrics.csv", "table.md", "table.csv", "table.tex", "index.html"):
        assert (copy / name).read_bytes() == (committed / name).read_bytes(), name


def test_every_splade_row_names_its_encode_precision(tmp_path):
    """float32 is the exact path and bf16 is not: the tables say which one each SPLADE row used, and the
    precision survives results.json."""
    pq: dict = {}
    conds = [run("bm25", D1, [0.5], system="bm25", perquery=pq),
             run("f32", D1, [0.4], perquery=pq, precision="float32"),
             run("bf16", D1, [0.3], variant="rescaled", perquery=pq, precision="bfloat16")]
    md = (publish(suite(conds, pq), tmp_path / "mixed") / "table.md").read_text()
    assert ("Encoded in float32 (the exact path: canonical impacts, the same on every encode path): SPLADE bb baseline; "
            "bfloat16: SPLADE bb rescaled.") in md
    uniform = publish(suite(conds[:2], pq), tmp_path / "uniform")
    assert "Encoded in float32 (the exact path: canonical impacts, the same on every encode path): every SPLADE row." \
        in (uniform / "table.md").read_text()
    assert [c.precision for c in read_results(uniform).conditions] == ["", "float32"]
