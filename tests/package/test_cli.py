"""The command line: an ad-hoc ir_datasets id, a TREC run file as a system, --set, --version, help
with defaults, one spelling across commands, and the one-line errors of each."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import tomllib
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from helpers import ROOT
from helpers.pipeline import run_cli


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from benchmark.model.head_diagnostics import build_parser as norms
    from benchmark.report.report_cli import build_parser as report
    from benchmark.run import build_parser as run

    return {"run": run(), "norms": norms(), "report": report()}


# --------------------------------------------------------------------------- an ad-hoc id and a run file


def test_adhoc_cranfield_bm25_and_its_run_file_as_a_system(tmp_path, capsys):
    """`--datasets cranfield` without --suite: BM25 with cranfield's conventional measures; then the
    BM25 run file, given back as `--run`, scores exactly what BM25 scored and what ir_measures says."""
    import ir_measures

    runs, results = tmp_path / "runs", tmp_path / "results"
    common = [
        "--datasets",
        "cranfield",
        "--max-queries",
        "20",
        "--set",
        "bm25.k1=1.2",
        "--runs-dir",
        str(runs),
        "--results-dir",
        str(results),
    ]
    assert run_cli(*common) == 0
    out = capsys.readouterr().out
    # topics, corpus, index, search, evaluate; each line names the system and dataset, not only a hash
    assert (
        "stage 1 of 5 (corpus: cranfield), 0s elapsed, ETA unknown" in out
        and "stage 5 of 5 (evaluate: BM25, cranfield)" in out
    )
    assert re.search(r"^\[run\] search-[0-9a-f]{12} \(BM25, cranfield\)$", out, re.M)
    assert "\r" not in out  # captured output is no terminal: no bar redraws
    assert "| BM25 |" in out  # the headline table closes the run
    folder = results / "adhoc@datasets=cranfield,max-queries=20,set=bm25.k1=1.2"
    # the last line: minutes and the page to open; no verdict, since an ad-hoc suite expects no scores
    assert re.fullmatch(
        rf"suite adhoc finished in \d+\.\d min; page {re.escape(str(folder / 'index.html'))}", out.splitlines()[-1]
    )
    first = json.loads((folder / "results.json").read_text())
    (bm25,) = first["conditions"]
    assert sorted(bm25["metrics"]) == ["R@1000", "nDCG@10"]  # no family: the default rule
    assert "--suite" not in bm25["command"] and "--set bm25.k1=1.2" in bm25["command"]
    assert (
        "Ad hoc: datasets=cranfield,max-queries=20,set=bm25.k1=1.2 (no suite file; each dataset's measures from its "
        "conventions)." in (folder / "table.md").read_text()
    )

    (search,) = (runs / "search").glob("search-*")
    run_file = tmp_path / "bm25.trec"
    lines = (search / "run.trec").read_text().splitlines()
    assert json.loads((search / "config.json").read_text())["config"]["k1"] == 1.2  # --set reached the search stage
    # (k is not lowered here: R@1000, one of cranfield's measures, would be refused at k < 1000)
    run_file.write_text("".join(line.rsplit(" ", 1)[0] + " my-tag\n" for line in lines))
    capsys.readouterr()
    assert run_cli(*common, "--run", f"again={run_file}") == 0
    assert "(run file)" in capsys.readouterr().out
    second = json.loads(
        (results / "adhoc@datasets=cranfield,max-queries=20,set=bm25.k1=1.2,run=again" / "results.json").read_text()
    )
    rows = {c["system"]: c for c in second["conditions"]}
    assert rows["bm25"]["metrics"] == bm25["metrics"]  # cached, unchanged
    assert rows["run"]["variant"] == "again" and rows["run"]["metrics"] == bm25["metrics"]

    (topics,) = (runs / "topics").glob("topics-*")
    qrels = list(ir_measures.read_trec_qrels(str(topics / "qrels.txt")))
    direct = ir_measures.calc_aggregate(
        [ir_measures.parse_measure(m) for m in ("nDCG@10", "R@1000")],
        qrels,
        list(ir_measures.read_trec_run(str(run_file))),
    )
    assert {str(m): v for m, v in direct.items()} == pytest.approx(
        rows["run"]["metrics"], abs=1e-12
    )  # float summation order


def test_conventional_measures_by_rule():
    from benchmark.suites.adhoc import conventional_measures

    assert conventional_measures("beir/scifact/test") == ["nDCG@10", "R@100", "R@1000"]
    assert conventional_measures("msmarco-passage/dev/small") == ["RR@10", "R@1000"]  # official RR@10 is the family's
    # the family's, then what ir_datasets documents as official for the id
    assert conventional_measures("msmarco-passage/trec-dl-2019/judged") == [
        "nDCG@10",
        "R(rel=2)@1000",
        "RR(rel=2)",
        "AP(rel=2)",
    ]
    assert conventional_measures("cranfield") == ["nDCG@10", "R@1000"]


def test_adhoc_needs_datasets_and_is_no_packaged_suite(capsys):
    from benchmark.suites import suite_names
    from benchmark.suites.adhoc import ADHOC

    assert ADHOC not in suite_names()
    assert run_cli("--dry-run") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: give --suite NAME (one of: beir,") and "--datasets cranfield" in err


def _run_line(tmp_path: Path, body: str) -> str | None:
    from benchmark.evaluation.external_runs import run_file_problem

    path = tmp_path / "r.trec"
    path.write_text(body)
    return run_file_problem(path)


def test_run_file_problems_name_the_line(tmp_path):
    from benchmark.evaluation.external_runs import parse_runs

    good = "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.0 t\n"
    assert _run_line(tmp_path, good) is None
    assert "line 3 has 5 column(s)" in _run_line(tmp_path, good + "q2 Q0 d1 1 2.0\n")
    assert _run_line(tmp_path, "q1 Q0 d1 1 2.5\n").endswith(
        "has 5 column(s), 'q1 Q0 d1 1 2.5'; a TREC run line is "
        "'QID Q0 DOCID RANK SCORE TAG' (6 columns separated by whitespace)"
    )
    assert "line 2: rank 'x' is not an integer" in _run_line(tmp_path, "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 x 1.0 t\n")
    assert "line 1: score 'nan' is not a finite number" in _run_line(tmp_path, "q1 Q0 d1 1 nan t\n")
    assert "line 3 ranks document 'd1' for query 'q1' a second time" in _run_line(tmp_path, good + "q1 Q0 d1 3 0.5 t\n")
    assert "holds no run line" in _run_line(tmp_path, "\n\n")
    runs, problems = parse_runs(
        [
            "a",
            "bm25=x.trec",
            f"ok={tmp_path / 'r.trec'}",
            f"ok={tmp_path / 'r.trec'}",
            f"gone={tmp_path / 'missing.trec'}",
        ]
    )
    assert runs == [] and len(problems) == 5
    assert problems[0] == "--run 'a' is not NAME=PATH; write e.g. --run my-bm25=runs/bm25.trec"
    assert problems[1].startswith("--run name 'bm25' must be a plain name") and "other than bm25, splade" in problems[1]
    assert (
        "holds no run line" in problems[2]
        and problems[3] == "--run name 'ok' is given twice; give each run file its own name"
    )
    assert problems[4].endswith("missing.trec' does not exist; pass --run NAME=PATH with the path of a TREC run file")


def test_run_file_needs_one_dataset(tmp_path):
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 2.5 t\n")
    opts = Options(datasets=["beir/scifact/test", "beir/nfcorpus/test"], runs=(("mine", str(run)),))
    with pytest.raises(BenchmarkError, match=r"^--run evaluates a run file on one dataset, and this run has 2 "):
        build_plan(load_suite("beir"), opts)
    plan = build_plan(
        load_suite("beir"),
        Options(
            datasets=["beir/scifact/test"], backbones=["bert-tiny"], variants=["baseline"], runs=(("mine", str(run)),)
        ),
    )
    (row,) = [c for c in plan.conditions if c.system == "run"]
    assert (
        row.variant == "mine"
        and row.search.kind.name == "runfile"
        and row.command.endswith(f"--run mine=<path to {run.name}>")
    )
    assert "--systems run" in row.command and str(run.parent) not in row.command  # the row only; no machine path
    first = row.search.id  # ids are computed on first use
    run.write_text("q1 Q0 d1 1 2.25 t\n")  # an edited run file is a new stage
    again = build_plan(
        load_suite("beir"),
        Options(
            datasets=["beir/scifact/test"], backbones=["bert-tiny"], variants=["baseline"], runs=(("mine", str(run)),)
        ),
    )
    assert [c for c in again.conditions if c.system == "run"][0].search.id != first


# --------------------------------------------------------------------------- --set


def test_set_overrides_suite_and_recipe_values():
    from benchmark.common.config import parse_override
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    assert parse_override("encode.precision=bfloat16") == (["encode", "precision"], "bfloat16")
    assert parse_override("splade.seeds=[1, 2]") == (["splade", "seeds"], [1, 2])
    with pytest.raises(BenchmarkError, match=r"^--set 'k' is not KEY=VALUE; write e.g. --set k=100"):
        parse_override("k")
    opts = Options(sets=("k=100", "bm25.k1=1.2", "recipe.max_steps=3"))
    suite = load_suite("smoke", opts.suite_overrides())
    assert (suite.k, suite.bm25.k1, suite.bm25.b) == (100, 1.2, 0.4)
    plan = build_plan(suite, opts)
    assert plan.recipe["max_steps"] == 3 and plan.subset == "set=k=100,set=bm25.k1=1.2,set=recipe.max_steps=3"
    plain = build_plan(load_suite("smoke"), Options())
    train = {c.train.id for c in plan.conditions if c.train is not None}
    assert train.isdisjoint(c.train.id for c in plain.conditions if c.train is not None)
    with pytest.raises(
        BenchmarkError,
        match=r"^smoke.toml.bm25: unknown key 'k2'; valid keys: k1, b. Remove or rename it \(with --set bm25.k2=1\)$",
    ):
        load_suite("smoke", Options(sets=("bm25.k2=1",)).suite_overrides())
    with pytest.raises(BenchmarkError, match=r"unknown key 'max_step' \(did you mean 'max_steps'\?\)"):
        build_plan(load_suite("smoke"), Options(sets=("recipe.max_step=3",)))
    with pytest.raises(
        BenchmarkError, match=r"^smoke.toml.k = 0 must be an integer >= 1 and <= 2147483647 \(the ranking depth"
    ):
        load_suite("smoke", Options(sets=("k=0",)).suite_overrides())


def test_set_recipe_without_training_is_an_error(capsys):
    assert run_cli("--datasets", "cranfield", "--set", "recipe.max_steps=3", "--dry-run") == 2
    err = capsys.readouterr().err
    assert err == (
        "error: --set recipe.max_steps=3: this run trains no model, so no recipe reads it; add --recipe NAME "
        "(and --backbones) or drop it\n"
    )


# --------------------------------------------------------------------------- one CLI


def test_version_of_every_command_is_the_package_version(capsys):
    import benchmark

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert benchmark.__version__ == version
    from benchmark.perf.perf_cli import parse_args as perf

    commands = {name: parser.parse_args for name, parser in _parsers().items()} | {"perf": perf}
    for name, parse in commands.items():
        with pytest.raises(SystemExit) as exit_:
            parse(["--version"])
        assert exit_.value.code == 0 and capsys.readouterr().out == f"splade-rescale-benchmark {version}\n", name


def test_every_flag_says_its_default():
    from benchmark.common.command_line import HelpFormatter

    for name, parser in _parsers().items():
        formatter = HelpFormatter(parser.prog)
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.help == argparse.SUPPRESS:
                continue  # switches (off unless given), --help, --version, hidden flags
            text = formatter._get_help_string(action)
            assert "default" in text or "required" in text, (name, action.option_strings, text)


def test_one_spelling_across_commands():
    parsers = _parsers()
    run, norms = parsers["run"], parsers["norms"]
    for argv in (["--backbones", "a,b"], ["--backbones", "a", "b"]):
        from benchmark.common.command_line import split_list

        assert split_list(run.parse_args(argv).backbones) == ["a", "b"]
        assert split_list(norms.parse_args(argv).backbones) == ["a", "b"]
    for new, old in (("--rescale-factor", "--rescale"), ("--rescale-method", "--method")):
        for p in (run, norms):
            flags = {s for a in p._actions for s in a.option_strings}
            assert {new, old} <= flags, (p.prog, new, old)
    args = norms.parse_args(["--backbones", "x", "--rescale-factor", "0.5", "--rescale-method", "tied,untie"])
    assert args.rescale == 0.5 and split_list(args.method) == ["tied", "untie"]
    assert norms.parse_args(["--backbones", "x", "--rescale", "2", "--method", "tied"]).rescale == 2.0


def test_console_scripts_license_and_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    scripts = project["scripts"]
    assert set(scripts) == {
        "benchmark",
        "benchmark-run",
        "benchmark-report",
        "benchmark-norms",
        "benchmark-perf",
        "benchmark-export",
    }
    for target in scripts.values():
        module, _, func = target.partition(":")
        assert callable(getattr(importlib.import_module(module), func)), target
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "License :: OSI Approved :: Apache Software License" not in project["classifiers"]  # PEP 639: the SPDX field
    assert any(c.startswith("Topic :: Scientific/Engineering") for c in project["classifiers"])
    assert project["urls"]


def test_a_matched_arm_names_its_missing_reference_backbone(tmp_path, capsys):
    from benchmark.model.loader import backbone_problems

    if not backbone_problems("bert-base-uncased", deep=True):
        pytest.skip("bert-base-uncased loads here: the error cannot happen")
    # the paper's 'rescaled' arm is a fixed k and needs no reference; the matched extension arms do
    assert (
        run_cli(
            "--suite",
            "smoke",
            "--variants",
            "match-logit-std",
            "--max-docs",
            "50",
            "--max-queries",
            "2",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(tmp_path / "results"),
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(
        "error: variant 'match-logit-std' scales each backbone's MLM head so that its logit-std on the "
        "shipped sample equals reference backbone 'bert-base-uncased''s"
    )
    assert "so the reference must load, and it cannot: backbone 'bert-base-uncased':" in err
    assert err.rstrip().endswith("Or give the factor itself: --rescale-factor F (or --match-norm NUMBER)")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("config.json"))  # before any work


def test_training_prints_one_compact_line_per_logging_step():
    from benchmark.training.loop import log_line

    logs = {
        "loss": 0.4692,
        "grad_norm": 11.6,
        "learning_rate": 0.0003,
        "ranking_loss": 0.4671,
        "flops_reg_q": 2.84,
        "flops_reg_d": 5.28,
        "flops": 6.3,
        "nnz_q": 43.2,
        "nnz_d": 88.1,
        "lambda_q": 0.1,
        "event": "",
    }
    assert log_line(2, 6, logs) == (
        "step 2/6 · loss 0.4692 · ranking 0.4671 · FLOPS reg q 2.84 d 5.28 · nnz q 43 d 88 · grad 11.6 · lr 0.0003"
    )
    assert (
        log_line(6, 6, {"loss": 1.0, "dev_mrr": 0.31234, "event": "max_activation"})
        == "step 6/6 · loss 1 · dev RR@10 0.3123 · event max_activation"
    )


def test_progress_line_counts_the_stages_to_run():
    """The ETA prices the stage that is starting too; a kind not timed yet is priced at the mean of what
    ran and named; a resume prices kinds by what the store's finished stages took; the line names the
    stage's system."""
    from benchmark.pipeline.executor import Progress, duration

    assert [duration(s) for s in (4.6, 185, 7625)] == ["5s", "3m05s", "2h07m"]

    class Kind:
        def __init__(self, name):
            self.name = name

    class Node:
        def __init__(self, i, kind):
            self.id, self.kind = f"s{i}", Kind(kind)

    lines: list[str] = []
    stages = [Node(0, "index"), Node(1, "search"), Node(2, "search")]
    progress = Progress(stages, lines.append, labels={"s1": "bert-tiny x4, seed 42, beir/scifact/test"})
    progress.begin(stages[0])
    progress.end(stages[0], 10.0)
    progress.begin(stages[1])
    progress.end(stages[1], 2.0)
    progress.begin(stages[2])
    assert lines[0].startswith("stage 1 of 3 (index), ") and lines[0].endswith("elapsed, ETA unknown")
    # both searches left, the starting one included, each priced at the mean of what ran (index: 10 s)
    assert lines[1].startswith("stage 2 of 3 (search: bert-tiny x4, seed 42, beir/scifact/test), ")
    assert lines[1].endswith("ETA ~20s (search not timed yet)")
    assert lines[2].endswith("ETA ~2s") and lines[2].startswith("stage 3 of 3 (search)")  # the starting search: 2 s

    # a resume: the store's finished stages priced each kind before this run timed any
    lines.clear()
    resumed = [Node(3, "train"), Node(4, "encode"), Node(5, "search")]
    progress = Progress(resumed, lines.append, earlier={"train": [150.0, 158.0], "encode": [20.0], "search": [2.0]})
    progress.begin(resumed[0])
    assert lines[0].endswith("ETA ~2m56s")  # 154 + 20 + 2: the training that starts counts
    progress.end(resumed[0], 8.0)  # it resumed near its end
    progress.begin(resumed[1])
    assert lines[1].endswith("ETA ~22s")


def test_bars_on_a_terminal_only_and_a_line_every_few_seconds_elsewhere(monkeypatch):
    """Where stderr is no terminal a bar is a plain line at most every ``every`` seconds, never a redraw;
    a last line says where it ended, unless the last periodic line already did."""
    import io

    from benchmark.common.bars import PlainBar, bar, on_terminal

    now = [0.0]
    out = io.StringIO()
    plain = PlainBar(total=100, desc="encode docs 0", unit="doc", every=10.0, stream=out, clock=lambda: now[0])
    for _ in range(100):
        now[0] += 0.25  # 25 s in all
        plain.update(1)
    plain.close()
    assert out.getvalue().splitlines() == [
        "encode docs 0: 40/100 doc (40%), 10s, 4 doc/s",
        "encode docs 0: 80/100 doc (80%), 20s, 4 doc/s",
        "encode docs 0: 100/100 doc (100%), 25s, 4 doc/s",
    ]
    quick = io.StringIO()
    with PlainBar(total=5, desc="corpus", stream=quick, clock=lambda: 0.0) as short:
        short.update(5)
    assert quick.getvalue() == ""  # done within the interval: the stage's own [done] line says enough
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)  # a log file, not a terminal
    assert not on_terminal() and isinstance(bar(total=3), PlainBar)


def test_stage_lines_name_their_system():
    """Each stage of a real plan is named by its backbone and arm, training seed and dataset (from the
    stage and its ancestors), so a log line says which system it belongs to."""
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    plan = build_plan(load_suite("smoke"), Options(max_docs=600, max_queries=30))
    labels = plan.stage_labels()
    named = {(s.kind.name, labels.get(s.id)) for s in plan.stages()}
    assert named == {
        ("topics", "beir/scifact/test"),
        ("corpus", "beir/scifact/test"),
        ("index", "BM25, beir/scifact/test"),
        ("search", "BM25, beir/scifact/test"),
        ("evaluate", "BM25, beir/scifact/test"),
        ("backbone", "bert-tiny baseline"),
        # the training data: SciFact train, its negatives mined with BM25 over the whole corpus
        ("topics", "beir/scifact/train"),
        ("corpus", "beir/scifact"),
        ("index", "BM25, beir/scifact"),
        ("search", "BM25, beir/scifact/train"),
        ("triples", "beir/scifact/train"),
        ("train", "bert-tiny baseline, seed 42"),
        *(
            (kind, "bert-tiny baseline, seed 42, beir/scifact/test")
            for kind in ("encode", "index", "queries", "search", "evaluate")
        ),
        *(
            (kind, "bert-tiny baseline untrained, beir/scifact/test")
            for kind in ("encode", "index", "queries", "search", "evaluate")
        ),
    }
    sweep = build_plan(load_suite("scale-sweep"), Options(variants=["x4", "x4-projection"], seeds=["43"]))
    trains = sorted(labels for s in sweep.stages() if s.kind.name == "train" for labels in [sweep.stage_labels()[s.id]])
    assert trains == ["bert-tiny x4, seed 43", "bert-tiny x4-projection, seed 43"]
    published = build_plan(
        load_suite("published"), Options(datasets=["beir/scifact/test"], published=["naver/splade-v3"])
    )
    assert {published.stage_labels()[s.id] for s in published.stages() if s.kind.name == "search"} == {
        "BM25, beir/scifact/test",
        "naver/splade-v3 (published), beir/scifact/test",
    }


def test_transformers_bars_stay_off_the_terminal(capfd, tmp_path):
    """Loading and saving a model prints none of transformers' own bars ("Loading weights", "Writing
    model shards"), also where the run shows its own progress (reports kept); without the guard it does."""
    from transformers import AutoModelForMaskedLM

    from benchmark.model.checkpoints import quiet_transformers, resolve_checkpoint

    path = resolve_checkpoint("bert-tiny")
    model = AutoModelForMaskedLM.from_pretrained(path)
    model.save_pretrained(str(tmp_path / "bare"))
    assert "Loading weights" in capfd.readouterr().err  # what the guard has to stop
    with quiet_transformers(reports=False):
        model = AutoModelForMaskedLM.from_pretrained(path)
        model.save_pretrained(str(tmp_path / "guarded"))
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err and "it/s" not in err, err
