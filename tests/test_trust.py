"""No silent wrong result: what a run reads, what its records say and where its reports write are checked,
not trusted. Each test here failed before its guard, with a wrong number or a write outside its folder
under exit 0, or with a traceback where one line belongs.

Four mechanisms close them: outside inputs are snapshotted once and hashed against the planned id
(``benchmark.common.snapshot``); finished stages hold exactly what they recorded and their records are
checked against their own files (``Store.problem``, ``StageKind.record_problem``); names and paths read
from records stay inside their folder (``benchmark.common.confine``); signals stay Python's after the JVM
starts (``tests/test_interrupt.py``).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pipeline import run_cli

ROOT = Path(__file__).resolve().parents[1]
BM25 = 'name = "{name}"\ndescription = "BM25 on a local SciFact slice"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n[bm25]\n'


def _metrics(results: Path) -> dict[tuple[str, str], str]:
    """(system, measure) → value; a run file's system is its name."""
    with open(results / "metrics.csv", encoding="utf-8") as fh:
        return {(r["variant"] if r["system"] == "run" else r["system"], r["measure"]): r["value"] for r in csv.DictReader(fh)}


def _one_error(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A local SciFact slice (200 documents, 20 queries) and its BM25 run computed once: the true value."""
    from test_damage import scifact_folder

    base = tmp_path_factory.mktemp("trust")
    folder = scifact_folder(base / "slice")
    suite = base / "t.toml"
    suite.write_text(BM25.format(name="t", folder=folder))
    runs = base / "computed-runs"
    assert run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(base / "computed")) == 0
    true = _metrics(base / "computed" / "t")[("bm25", "nDCG@10")]
    search = next(p for p in (runs / "search").iterdir() if not p.name.startswith("."))
    return {"base": base, "folder": folder, "suite": suite, "runs": runs, "true": true, "run": search / "run.trec"}


# --------------------------------------------------------------------------- 1. inputs read once


def _reversed_ranking(text: str) -> str:
    """The same lines with each query's scores reversed: another ranking of the same size."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    by_query: dict[str, list[list[str]]] = {}
    for row in rows:
        by_query.setdefault(row[0], []).append(row)
    out = []
    for ranked in by_query.values():
        scores = [r[4] for r in ranked][::-1]
        out += [" ".join([*r[:4], s, r[5]]) for r, s in zip(ranked, scores)]
    return "\n".join(out) + "\n"


def _edited_when_run(monkeypatch, kind: type, path: Path, edited: str) -> None:
    """``path`` is rewritten when ``kind``'s stage starts: after the plan fingerprinted it, before it is read."""
    real = kind.run.__func__

    def run(cls, config, inputs, out, ctx):
        path.write_text(edited)
        return real(cls, config, inputs, out, ctx)

    monkeypatch.setattr(kind, "run", classmethod(run))


def test_a_run_file_edited_while_the_run_goes_is_refused_and_the_restored_one_scored(world, tmp_path, monkeypatch, capsys):
    from benchmark.stages.runfile import RunFile

    original = world["run"].read_text()
    run_file = tmp_path / "x.trec"
    run_file.write_text(original)
    runs = tmp_path / "runs"
    shutil.copytree(world["runs"], runs)
    argv = ["--suite", str(world["suite"]), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results"),
            "--run", f"x={run_file}"]
    with monkeypatch.context() as m:
        _edited_when_run(m, RunFile, run_file, _reversed_ranking(original))
        line = _one_error(capsys, run_cli(*argv))
    assert f"run file {str(run_file)!r} changed after this run was planned" in line, line
    assert not [p for p in (runs / "runfile").iterdir() if not p.name.startswith(".")]  # nothing published
    run_file.write_text(original)  # restored: the id planned before the edit
    assert run_cli(*argv, "--verify") == 0
    assert _metrics(tmp_path / "results" / "t@run=x")[("x", "nDCG@10")] == world["true"]  # the BM25 run, as a file


@pytest.mark.parametrize("edited, kind", [("qrels/test.tsv", "topics"), ("corpus.jsonl", "corpus")])
def test_a_local_folder_edited_while_the_run_goes_is_refused_and_the_restored_one_scored(world, tmp_path, monkeypatch,
                                                                                          capsys, edited, kind):
    from benchmark.stages import KINDS

    folder = tmp_path / "slice"
    shutil.copytree(world["folder"], folder)
    path = folder / edited
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    if kind == "topics":  # every judgement moved to the next judged document: other relevant documents
        rows = [line.rstrip("\n").split("\t") for line in lines[1:]]
        docs = [r[1] for r in rows]
        changed = lines[0] + "".join(f"{q}\t{docs[(i + 1) % len(docs)]}\t{s}\n" for i, (q, _, s) in enumerate(rows))
    else:  # every document's text replaced by the next one's
        docs = [json.loads(line) for line in lines]
        changed = "".join(json.dumps({**d, "title": "", "text": docs[(i + 1) % len(docs)]["text"]}) + "\n"
                          for i, d in enumerate(docs))
    suite = tmp_path / "t.toml"
    suite.write_text(BM25.format(name="t", folder=folder))
    argv = ["--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")]
    with monkeypatch.context() as m:
        _edited_when_run(m, dict(KINDS.items())[kind], path, changed)
        line = _one_error(capsys, run_cli(*argv))
    assert "changed after this run was planned" in line and str(folder) in line, line
    path.write_text(original)
    assert run_cli(*argv, "--verify") == 0
    assert _metrics(tmp_path / "results" / "t")[("bm25", "nDCG@10")] == world["true"]


def test_a_run_file_that_is_a_pipe_is_one_line(world, tmp_path, capsys):
    """``--run x=<(zcat run.gz)`` is a pipe that can be read once (it gave 47 lines of traceback), and a
    named pipe without a writer blocked the run for ever: both are one line before any work."""
    from benchmark.run import main

    read, write = os.pipe()
    os.write(write, "".join(world["run"].read_text().splitlines(keepends=True)[:50]).encode())  # within a pipe's buffer
    os.close(write)
    try:
        line = _one_error(capsys, main(["--suite", str(world["suite"]), "--runs-dir", str(tmp_path / "runs"),
                                        "--results-dir", str(tmp_path / "results"), "--run", f"x=/dev/fd/{read}",
                                        "--no-progress"]))
    finally:
        os.close(read)
    assert f"run file '/dev/fd/{read}' is a pipe, not a regular file" in line and "save it to a file first" in line, line
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "benchmark.run", "--suite", str(world["suite"]), "--runs-dir",
                           str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"), "--run", f"x={fifo}",
                           "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"run file {str(fifo)!r} is a pipe, not a regular file" in proc.stderr
