"""2CR-style regression checks: verdicts on hand numbers, entries keyed by subset, the CI slice
(BM25 exact, untrained SPLADE bert-tiny within tolerance) on the shared pipeline fixture, and the
exit code of ``--check``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmark.pipeline.plan import Options, build_plan
from benchmark.report.check import check_suite, grade
from benchmark.stages.store import Store
from benchmark.suites import load_suite
from helpers import ROOT
from helpers.pipeline import SUBSET, run_cli

# Measured on the CI slice (600 docs, 30 queries of SciFact test) with the fixture's encode settings.
CI_SLICE = {"max_docs": 600, "max_queries": 30}


def entry(dataset="beir/scifact/test", system="bm25", measure="nDCG@10", value=None, tolerance=0.0, **extra) -> str:
    lines = [
        "[[expected]]",
        f'dataset = "{dataset}"',
        f'system = "{system}"',
        f'measure = "{measure}"',
        f"value = {value}",
        f"tolerance = {tolerance}",
    ]
    lines += [
        f"{k} = {json.dumps(v)}" if not isinstance(v, bool) else f"{k} = {str(v).lower()}" for k, v in extra.items()
    ]
    return "\n".join(lines) + "\n"


def test_grade_hand_numbers():
    assert grade(0.78054, 0.7805, 0.0) == "OK"  # equal at 4 decimals: exact
    assert grade(0.78056, 0.7805, 0.0) == "FAIL"  # rounds to 0.7806
    assert grade(0.7810, 0.7805, 0.0005) == "OK"
    assert grade(0.7815, 0.7805, 0.0005) == "OKish"  # within 2 × tolerance
    assert grade(0.7795, 0.7805, 0.0005) == "OKish"
    assert grade(0.7816, 0.7805, 0.0005) == "FAIL"
    assert grade(0.7900, 0.7805, 0.0005, okish=0.01) == "OKish"  # a documented looser band
    assert grade(0.7906, 0.7805, 0.0005, okish=0.01) == "FAIL"


def _fixture_suite(untrained_splade, tmp_path: Path, extra: str) -> Path:
    """The fixture's own suite (so every stage is cached) plus expected entries."""
    path = tmp_path / "mini.toml"
    path.write_text(untrained_splade["suite"].read_text() + "\n" + extra)
    return path


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_ci_slice_regression(untrained_splade, tmp_path, capsys):
    """BM25 on the slice is exact; untrained SPLADE bert-tiny within its tolerance."""
    expected = (
        entry(value=0.7805, **CI_SLICE)
        + entry(measure="RR@10", value=0.7567, **CI_SLICE)
        + entry(
            system="splade",
            backbone="bert-tiny",
            variant="baseline",
            trained=False,
            value=0.7314,
            tolerance=0.002,
            **CI_SLICE,
        )
        + entry(value=0.6789, tolerance=0.0005)
    )  # the full dataset: not this run's subset
    suite = _fixture_suite(untrained_splade, tmp_path, expected)
    plan = build_plan(load_suite(str(suite)), Options(max_docs=600, max_queries=30))
    lines: list[str] = []
    assert check_suite(plan, Store(untrained_splade["runs"]), out=lines.append) == 0
    assert [line.split()[0] for line in lines[:3]] == ["[OK]", "[OK]", "[OK]"]
    assert "expected 0.7805 (±0), got 0.7805" in lines[0]
    assert "splade bert-tiny baseline untrained" in lines[2] and "got 0.7314" in lines[2]
    assert lines[-1] == (
        "check (max_docs=600, max_queries=30): 3 OK, 0 OKish, 0 FAIL; "
        "1 entries for other subsets or datasets not checked"
    )

    # through the CLI: every stage is cached, so this only rereads runs/
    results = tmp_path / "results"
    assert (
        run_cli(
            "--suite",
            str(suite),
            *SUBSET,
            "--runs-dir",
            str(untrained_splade["runs"]),
            "--results-dir",
            str(results),
            "--check",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "3 OK, 0 OKish, 0 FAIL" in out and "[run]" not in out
    # the run's last line: minutes, the verdict (each entry listed above it) and the page to open
    folder = results / "mini@max-docs=600,max-queries=30"
    verdict = (
        "check (max_docs=600, max_queries=30): 3 OK, 0 OKish, 0 FAIL; 1 entries for other subsets or datasets not "
        "checked"
    )
    assert re.fullmatch(
        rf"suite mini finished in \d+\.\d min; {re.escape(verdict)}; page {re.escape(str(folder / 'index.html'))}",
        out.splitlines()[-1],
    ), out.splitlines()[-1]
    # without --check the verdict still ends the run, alone
    args = ["--suite", str(suite), *SUBSET, "--runs-dir", str(untrained_splade["runs"]), "--results-dir", str(results)]
    assert run_cli(*args) == 0
    out = capsys.readouterr().out
    assert not any(line.startswith("[OK]") for line in out.splitlines()) and out.splitlines()[-1].endswith(
        f"; {verdict} (--check lists each); page {folder / 'index.html'}"
    )


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_fail_and_okish_exit_code(untrained_splade, tmp_path, capsys):
    expected = (
        entry(value=0.7810, tolerance=0.0004, **CI_SLICE)  # off by 0.0005: OKish
        + entry(system="splade", backbone="bert-tiny", value=0.90, tolerance=0.01, **CI_SLICE)  # FAIL
        + entry(system="splade", backbone="ettin-17m", value=0.5, **CI_SLICE)
    )  # not in this run: FAIL
    suite = _fixture_suite(untrained_splade, tmp_path, expected)
    code = run_cli(
        "--suite",
        str(suite),
        *SUBSET,
        "--runs-dir",
        str(untrained_splade["runs"]),
        "--results-dir",
        str(tmp_path / "results"),
        "--check",
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "[OKish]  beir/scifact/test" in out
    assert "[FAIL]   beir/scifact/test" in out and "expected 0.9000 (±0.01, okish ±0.02), got 0.7314" in out
    assert "no such condition in this run" in out
    assert "0 OK, 1 OKish, 2 FAIL" in out


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_no_entries_for_this_subset(untrained_splade, tmp_path):
    suite = _fixture_suite(untrained_splade, tmp_path, entry(value=0.6789, tolerance=0.0005))
    plan = build_plan(load_suite(str(suite)), Options(max_docs=600, max_queries=30))
    lines: list[str] = []
    assert check_suite(plan, Store(untrained_splade["runs"]), out=lines.append) == 0
    assert lines == [
        "check: suite mini has no expected scores for this run (max_docs=600, max_queries=30); "
        "1 entry for other subsets or datasets"
    ]


def test_collapse_expectations(tmp_path):
    """A collapse is a verdict of its own: OK when expected (the paper's baselines), FAIL otherwise."""
    suite = tmp_path / "c.toml"
    suite.write_text(
        'name = "c"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        '[splade]\nbackbones = ["modernbert-base"]\nvariants = ["baseline", "rescaled"]\nrecipe = "smoke"\n'
        '[[expected]]\ndataset = "beir/scifact/test"\nsystem = "splade"\nbackbone = "modernbert-base"\n'
        'variant = "baseline"\ncollapsed = true\n'
        + entry(system="splade", backbone="modernbert-base", variant="rescaled", value=0.6, tolerance=0.01)
    )
    plan = build_plan(load_suite(str(suite)), Options())
    store = Store(tmp_path / "runs")
    base, resc = (c for c in plan.conditions)
    for cond, status in ((base, "collapsed"), (resc, "collapsed")):  # both collapsed: the second should not have
        folder = store.path(cond.train)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(
            json.dumps(
                {
                    "id": cond.train.id,
                    "kind": "train",
                    "status": "complete",
                    "record": {"status": status, "collapse_reason": "dense"},
                }
            )
        )
    lines: list[str] = []
    assert check_suite(plan, store, out=lines.append) == 1
    # these hand-written stage folders record no versions: --check says so before the verdicts
    assert lines[0].startswith("[warn] 2 cached stage(s) were computed with other versions: no versions recorded")
    lines = lines[1:]
    assert lines[0].startswith("[OK]") and "collapsed, as expected" in lines[0]
    assert lines[1].startswith("[FAIL]") and "collapsed (dense); expected 0.6000" in lines[1]
    (store.path(resc.train) / "config.json").write_text(
        json.dumps({"id": resc.train.id, "kind": "train", "status": "complete", "record": {"status": "ok"}})
    )
    lines = []
    assert check_suite(plan, store, out=lines.append) == 1
    assert "missing: evaluate stage" in lines[2]


def test_packaged_smoke_suite_has_slice_entries():
    suite = load_suite("smoke")
    keyed = {(e.system, e.trained, e.measure, e.max_docs, e.max_queries): e.value for e in suite.expected}
    assert keyed[("bm25", None, "nDCG@10", None, None)] == 0.6789
    assert keyed[("bm25", None, "nDCG@10", 600, 30)] == 0.7805
    assert keyed[("splade", False, "nDCG@10", 600, 30)] == 0.7559
    assert keyed[("splade", True, "nDCG@10", 600, 30)] == 0.7760


def test_numerics_are_recorded_and_a_different_thread_count_is_named():
    """A CPU backward's reductions depend on torch's kernels and intra-op threads, so cached training from
    another thread count is not these bytes: the record keeps both, and --check names the difference."""
    import torch

    from benchmark.common.environment import differences, environment

    env = environment()
    threads = torch.get_num_threads()
    assert env["numerics"]["intra_op_threads"] == threads
    assert env["numerics"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    other = {**env, "numerics": {**env["numerics"], "intra_op_threads": threads + 6}}
    assert differences(other, env) == [f"intra-op threads {threads + 6} (now {threads})"]
    assert differences({**env, "numerics": None}, env) == []  # a stage that ran no model


def test_an_expected_score_names_the_reference_engines_row():
    """``--engines lucene,pisa`` plans each SPLADE row twice; the suite's expected scores were measured with
    Lucene, so each entry names the Lucene row alone (it once matched both, and every check was 'ambiguous')."""
    from benchmark.report.check import _matching

    plan = build_plan(load_suite("smoke"), Options(engines=["lucene", "pisa"]))
    splade = [e for e in plan.suite.expected if e.system == "splade" and e.max_docs is None]
    assert splade
    for e in splade:
        (found,) = _matching(e, plan.conditions, [e.dataset])
        assert isinstance(found, list) and [c.engine for c in found] == [""], e
    assert any(c.engine == "pisa:maxscore" for c in plan.conditions)


def test_without_the_reference_row_an_exact_engines_twin_is_checked():
    """``--engines pisa`` plans no Lucene row: an expected score then names the PISA twin (exact: the same
    top-k scores as Lucene, tests/retrieval/test_engines.py), in the plan and in a results folder; an
    approximate engine's row never stands in."""
    import dataclasses

    from benchmark.report.check import _matching, check_results
    from benchmark.report.results import read_results

    plan = build_plan(load_suite("smoke"), Options(engines=["pisa"]))
    splade = [e for e in plan.suite.expected if e.system == "splade" and e.max_docs is None]
    for e in splade:
        (found,) = _matching(e, plan.conditions, [e.dataset])
        assert isinstance(found, list) and [c.engine for c in found] == ["pisa:maxscore"], e
    seismic = build_plan(load_suite("smoke"), Options(engines=["seismic"]))
    assert all(isinstance(_matching(e, seismic.conditions, [e.dataset])[0], str) for e in splade)
    results = read_results(ROOT / "results" / "smoke@engines=lucene,pisa")
    both, _, _ = check_results(results)
    twins = dataclasses.replace(results, conditions=[c for c in results.conditions if "pisa:" in c.variant])
    alone, _, _ = check_results(twins)
    splade_verdicts = [(c.entry, c.verdict.verdict, c.verdict.got) for c in alone if c.entry.system == "splade"]
    assert splade_verdicts and splade_verdicts == [
        (c.entry, c.verdict.verdict, c.verdict.got) for c in both if c.entry.system == "splade"
    ]


def test_report_selects_a_narrowed_runs_folder_whose_name_holds_commas(tmp_path, capsys):
    """``--suite smoke@engines=lucene,pisa`` names one folder (a narrowed run's), not two suites."""
    from benchmark.report.report_cli import main

    (tmp_path / "smoke@engines=lucene,pisa").mkdir()
    assert main(["--results-dir", str(tmp_path), "--suite", "smoke@engines=lucene,pisa"]) == 0
    assert "skipped" in capsys.readouterr().out  # found, and not a suite's results (no results.json here)
    assert main(["--results-dir", str(tmp_path), "--suite", "smoke,paper-mini"]) == 1  # two names, neither here
