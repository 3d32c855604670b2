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
