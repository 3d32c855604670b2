"""One line for every failure inside a stage, and a malformed config.json in any stage kind recomputed as damage.

Every kind's ``run`` is replaced by one that writes a file and returns its kind's empty record (or raises): what
is tested is the boundary around the kinds, the executor's and the store's, for every kind at once, without
computing anything.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmark.stages import KINDS
from helpers.pipeline import run_cli

KIND_NAMES = [name for name, _ in KINDS.items()]


def _args(tmp: Path, run_file: Path) -> list[str]:
    """Cranfield with a trained bert-tiny and a --run file: a plan with a stage of every kind."""
    return [
        "--datasets",
        "cranfield",
        "--max-queries",
        "20",
        "--backbones",
        "bert-tiny",
        "--recipe",
        "smoke",
        "--run",
        f"mine={run_file}",
        "--runs-dir",
        str(tmp / "runs"),
        "--results-dir",
        str(tmp / "results"),
    ]


def _run_file(tmp: Path) -> Path:
    path = tmp / "mine.trec"
    path.write_text("10 Q0 259 1 9.5 mine\n10 Q0 405 2 8.5 mine\n")
    return path


def _fake_kinds(monkeypatch: pytest.MonkeyPatch, failing: str | None = None) -> None:
    for _, kind in KINDS.items():

        def run(config, inputs, out, ctx, kind=kind):
            if kind.name == failing:
                raise RuntimeError(f"something broke inside {kind.name}\nsecond line of the message")
            (out / "made.txt").write_text(kind.name)
            return kind.Record()

        monkeypatch.setattr(kind, "run", staticmethod(run))
        # the fakes write none of the files a kind checks its record against (a corpus's documents)
        monkeypatch.setattr(kind, "record_problem", staticmethod(lambda meta, folder, deep: None))


def test_the_fake_plan_has_a_stage_of_every_kind(tmp_path):
    from benchmark.run import parse_args, prepare

    plan, *_ = prepare(parse_args([*_args(tmp_path, _run_file(tmp_path)), "--dry-run"]))
    assert sorted({s.kind.name for s in plan.stages()}) == sorted(KIND_NAMES)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_an_exception_inside_any_stage_kind_is_one_line_naming_the_stage_and_its_log(
    tmp_path, capsys, monkeypatch, kind
):
    _fake_kinds(monkeypatch, failing=kind)
    capsys.readouterr()
    assert run_cli(*_args(tmp_path, _run_file(tmp_path))) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    (log,) = (tmp_path / "runs" / kind).glob(f"{kind}-*.log")
    stage_id = log.name[: -len(".log")]
    assert lines[0].startswith(f"error: stage {stage_id} ")
    assert f"RuntimeError: something broke inside {kind} (+1 lines)" in lines[0]
    assert lines[0].endswith(f"report this line with the log; the full traceback is in {log}")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "second line of the message" in text
    assert not (tmp_path / "runs" / kind / stage_id).exists()  # nothing published


def test_a_permission_error_names_the_file_and_the_fix(tmp_path, capsys, monkeypatch):
    """A file made unreadable after planning (a run file, qrels): one line naming it, not a traceback."""
    from benchmark.stages.runfile import RunFile

    run_file = _run_file(tmp_path)
    _fake_kinds(monkeypatch)

    def run(config, inputs, out, ctx):  # what reading a file made unreadable after planning raises
        raise PermissionError(13, "Permission denied", str(tmp_path / "unreadable.tsv"))

    monkeypatch.setattr(RunFile, "run", staticmethod(run))
    capsys.readouterr()
    assert run_cli(*_args(tmp_path, run_file)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"reading {tmp_path / 'unreadable.tsv'}: PermissionError: [Errno 13] Permission denied" in line
    assert "make it readable and rerun the same command; the full traceback is in " in line


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A runs folder where every stage of the plan finished (fake records), and its plan."""
    from benchmark.pipeline.executor import LocalExecutor
    from benchmark.run import parse_args, prepare
    from benchmark.stages import Context

    tmp = tmp_path_factory.mktemp("finished")
    args = _args(tmp, _run_file(tmp))
    with pytest.MonkeyPatch.context() as mp:
        _fake_kinds(mp)
        plan, store, _, _ = prepare(parse_args(args))
        targets = [c.evaluate for c in plan.conditions if c.evaluate is not None]
        LocalExecutor(store, Context(progress=False, log=lambda m: None)).run(targets)
    return tmp, args


def _rerun(tmp: Path, args: list[str]) -> list[str]:
    from benchmark.pipeline.executor import LocalExecutor
    from benchmark.run import parse_args, prepare
    from benchmark.stages import Context

    logs: list[str] = []
    plan, store, _, _ = prepare(parse_args(args))
    store.log = logs.append
    targets = [c.evaluate for c in plan.conditions if c.evaluate is not None]
    LocalExecutor(store, Context(progress=False, log=logs.append)).run(targets)
    return logs


MALFORMED = {
    "outputs is 5": (lambda meta: meta.update(outputs=5), "its config.json's outputs is 5, not a JSON object"),
    "an outputs entry is 5": (
        lambda meta: meta.update(outputs={"made.txt": 5}),
        "its config.json's outputs entry 'made.txt' is 5, not [size, sha256]",
    ),
    "record is a list": (lambda meta: meta.update(record=[]), "its record is a JSON list, not a JSON object"),
    "inputs is a list": (lambda meta: meta.update(inputs=[1]), "its config.json's inputs is [1], not a JSON object"),
    "a record field of another type": (
        lambda meta: meta["record"].update({next(iter(KINDS[meta["kind"]].Record.keys())): [[]]}),
        "its record's",
    ),
}


@pytest.mark.parametrize("malformed", sorted(MALFORMED))
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_malformed_config_json_in_any_stage_kind_is_damage_and_recomputed(
    finished, tmp_path, monkeypatch, kind, malformed
):
    base, args = finished
    shutil.copytree(base / "runs", tmp_path / "runs")
    args = _args(tmp_path, base / "mine.trec")
    _fake_kinds(monkeypatch)
    # all reused as they are, their hashes checked
    assert not [line for line in _rerun(tmp_path, [*args, "--verify"]) if not line.startswith("[cached]")]
    folder = sorted((tmp_path / "runs" / kind).glob(f"{kind}-*"))[0]
    meta = json.loads((folder / "config.json").read_text())
    edit, problem = MALFORMED[malformed]
    edit(meta)
    (folder / "config.json").write_text(json.dumps(meta))
    logs = _rerun(tmp_path, [*args, "--verify"])  # --verify walks below the finished evaluate stages
    damaged = [line for line in logs if line.startswith("[damaged]")]
    assert damaged[0].startswith(f"[damaged] {folder.name}: {problem}"), logs
    assert all("found damaged in this run; recomputing it" in line for line in damaged[1:])  # built on it
    assert f"[done] {folder.name}" in " ".join(logs)
    assert json.loads((folder / "config.json").read_text())["record"] == KINDS[kind].Record().to_json()  # recomputed
    assert not [line for line in _rerun(tmp_path, args) if not line.startswith("[cached]")]


def test_an_evaluate_record_whose_metrics_is_a_list_is_damage(finished, tmp_path, monkeypatch):
    base, args = finished
    shutil.copytree(base / "runs", tmp_path / "runs")
    args = _args(tmp_path, base / "mine.trec")
    _fake_kinds(monkeypatch)
    folder = sorted((tmp_path / "runs" / "evaluate").glob("evaluate-*"))[0]
    meta = json.loads((folder / "config.json").read_text())
    meta["record"]["metrics"] = [0.5]
    (folder / "config.json").write_text(json.dumps(meta))
    damaged = [line for line in _rerun(tmp_path, args) if line.startswith("[damaged]")]  # read on every reuse
    assert damaged == [
        f"[damaged] {folder.name}: its record's 'metrics' is [0.5] (a JSON list), not a JSON object whose values "
        "are each a number (EvaluateRecord); recomputing it"
    ]


# --------------------------------------------------------------------------- checks before work


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one stderr line of a run refused before any stage (no runs folder made)."""
    capsys.readouterr()
    runs = ["--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")]
    assert run_cli(*args, *runs) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert not (tmp_path / "runs").exists()
    return line


@pytest.mark.parametrize(
    "setting, expected",
    [
        ("bm25.k1=inf", "bm25.k1 = inf must be a finite number"),  # a Java exception after the index was built
        ("bm25.k1=nan", "bm25.k1 = nan must be a finite number"),
        ("bm25.k1=1e39", "bm25.k1 = 1e+39 is inf in float32"),  # Lucene's BM25Similarity holds k1 as a float
        ("recipe.lambda_d=inf", "lambda_d = inf must be a finite number"),
        ("recipe.learning_rate=1e-50", "learning_rate = 1e-50 is 0 in float32"),
    ],
)
def test_bm25_and_recipe_values_must_be_finite_float32_before_work(tmp_path, capsys, setting, expected):
    args = ["--datasets", "cranfield", "--backbones", "bert-tiny", "--recipe", "smoke", "--set", setting]
    assert expected in _refused(tmp_path, capsys, *args)


def test_an_encode_length_past_the_backbones_positions_is_refused_before_bm25_runs(tmp_path, capsys):
    line = _refused(
        tmp_path, capsys, "--datasets", "cranfield", "--backbones", "bert-tiny", "--set", "encode.max_doc_length=100000"
    )
    assert line == (
        "error: encode.max_doc_length = 100000, but backbone 'bert-tiny' has 512 positions (max_position_embeddings) "
        "and cannot read a longer input; set encode.max_doc_length to 512 or less (--set encode.max_doc_length=512)"
    )


def test_a_measure_deeper_than_the_search_is_refused_in_an_adhoc_run(tmp_path, capsys):
    """``--set measures=[…]`` on ``--datasets`` was dropped for each dataset's own measures: an empty P@2000 column."""
    line = _refused(tmp_path, capsys, "--datasets", "cranfield", "--set", 'measures=["P@2000"]')
    assert line.startswith("error: measure(s) P@2000 rank deeper than the search depth k = 1000")


def test_set_measures_names_the_measures_of_an_adhoc_run(tmp_path):
    from benchmark.run import parse_args, prepare

    plan, *_ = prepare(parse_args(["--datasets", "cranfield", "--set", 'measures=["P@10"]', "--dry-run"]))
    assert [c.evaluate.config.measures for c in plan.conditions] == [("P@10",)]


def test_an_infinite_tolerance_is_refused(tmp_path, capsys):
    """``tolerance = inf`` graded 0.1 against 0.8598 as [OK]."""
    suite = tmp_path / "tol.toml"
    suite.write_text(
        'name = "tol"\ndescription = "d"\ndatasets = ["cranfield"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
        '[[expected]]\ndataset = "cranfield"\nsystem = "bm25"\nmeasure = "nDCG@10"\nvalue = 0.8598\ntolerance = inf\n'
    )
    line = _refused(tmp_path, capsys, "--suite", str(suite))
    assert "expected[0].tolerance = inf must be a finite number" in line


def test_perf_scale_refuses_doc_tokens_past_its_backbones_positions_before_writing_the_corpus(tmp_path, capsys):
    from benchmark.perf.scale import main

    capsys.readouterr()
    assert main(["--doc-tokens", "100000", "--docs", "100", "--work", str(tmp_path / "w"), "--out", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --doc-tokens 100000: the rehearsal's backbone scale-bert reads 1 to 512 tokens")
    assert not (tmp_path / "w").exists()


def test_a_corpus_with_a_lone_surrogate_escape_is_one_line(tmp_path, capsys):
    """``\\ud800`` is valid JSON but no UTF-8 text: one line naming the corpus stage and the fix."""
    folder = tmp_path / "sur"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "", "text": "alpha \\ud800 gamma"}\n{"_id": "d2", "title": "", "text": "beta"}\n'
    )
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha gamma"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    capsys.readouterr()
    runs = ["--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")]
    assert run_cli("--datasets", f"{folder}@test", *runs) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: stage corpus-") and "UnicodeEncodeError" in line
    assert "a lone surrogate escape such as \\ud800): fix that text and rerun; the full traceback is in" in line


# --------------------------------------------------------------------------- signals

HANGUP = """
import os, signal, sys
from pathlib import Path
from benchmark.common.signals import Interrupted, install_signal_handlers
from benchmark.stages.claims import Claims

install_signal_handlers()
claim = Claims(log=print).acquire(Path(sys.argv[1]) / ".stage")
try:
    os.kill(os.getpid(), signal.SIGHUP)
    print("not interrupted")
except Interrupted as exc:
    print("raised", exc)
finally:
    claim.release()
"""


def test_sighup_unwinds_like_sigterm_and_releases_the_claim(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", HANGUP, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "raised SIGHUP", proc.stderr
    assert list(tmp_path.iterdir()) == []  # the claim released


def test_ctrl_c_during_report_is_one_line(tmp_path, capsys, monkeypatch):
    import benchmark.report.build
    from benchmark.report.report_cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(benchmark.report.build, "rebuild", interrupted)
    capsys.readouterr()
    assert main(["--results-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err.splitlines() == [
        "interrupted (SIGINT): each results folder holds its earlier tables or its new ones; rerun to rebuild"
    ]


def test_ctrl_c_during_export_is_one_line(tmp_path, capsys, monkeypatch):
    import benchmark.report.model_export as model_export

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_export, "export_suite", interrupted)
    (tmp_path / "results" / "smoke").mkdir(parents=True)
    capsys.readouterr()
    out = tmp_path / "out"
    code = model_export.main(["--suite", "smoke", "--results-dir", str(tmp_path / "results"), "--out", str(out)])
    assert code == 130
    assert capsys.readouterr().err.splitlines() == [
        f"interrupted (SIGINT): nothing half-written was left in {out}; export again"
    ]


def test_a_run_files_ms_per_query_is_empty():
    """A ``--run`` row's ms/q was its file copy's time, labelled search time per query."""
    from benchmark.report.results import ConditionResult, SuiteResults, efficiency

    def condition(system: str, stage: str) -> ConditionResult:
        return ConditionResult(key=system, dataset="d", system=system, search_id=stage, queries=4, metrics={"m": 1.0})

    results = SuiteResults(
        suite="s",
        measures=["m"],
        conditions=[condition("bm25", "search-a"), condition("run", "runfile-b")],
        stage_log={
            "search-a": {"stage": "search", "seconds": 2.0, "bytes": 1},
            "runfile-b": {"stage": "runfile", "seconds": 3.0, "bytes": 1},
        },
    )
    costs = efficiency(results)
    assert costs["bm25"]["search_ms"] == 500.0 and costs["run"]["search_ms"] is None
