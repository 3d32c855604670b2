"""benchmark.common.kill_points: named kill points, several at once, and once across processes (BENCHMARK_KILL_ONCE)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

PASSES = (
    "from benchmark.common import kill_points\nfor name in ['a', 'b', 'a', 'b', 'a']:\n    print(name, "
    "flush=True)\n    kill_points.point(name)\n"
)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PASSES],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_the_nth_pass_of_any_listed_point_kills():
    proc = _run({"BENCHMARK_KILL_AT": "a#3,b#2"})
    assert proc.returncode == -signal.SIGKILL and proc.stdout.split() == ["a", "b", "a", "b"]  # b's 2nd pass first
    assert _run({"BENCHMARK_KILL_AT": "c"}).returncode == 0


def test_kill_once_lets_the_retry_pass(tmp_path):
    env = {"BENCHMARK_KILL_AT": "b", "BENCHMARK_KILL_ONCE": str(tmp_path)}
    first, second = _run(env), _run(env)
    assert first.returncode == -signal.SIGKILL and first.stdout.split() == ["a", "b"]
    assert second.returncode == 0 and second.stdout.split() == ["a", "b", "a", "b", "a"]
    assert [p.name for p in tmp_path.iterdir()] == ["b#1"]


# --------------------------------------------------------------------------- a full disk
# A real ENOSPC from a real filesystem: runs/ on a small tmpfs, filled (all but a few KiB) right before
# the stage under test starts, so that the stage's own writes (Python's, or the JVM's) hit the limit
# (the small_disk fixture: tests/conftest.py).


def _filled_before(monkeypatch, kind, leave: int) -> None:
    """``kind.run`` starts on a disk with ``leave`` bytes free."""
    import shutil

    real = kind.run.__func__

    def run(cls, config, inputs, out, ctx):
        with open(Path(out).parent / "filler", "wb") as fh:
            fh.truncate(0)
            fh.write(b"\0" * max(shutil.disk_usage(out).free - leave, 0))
        return real(cls, config, inputs, out, ctx)

    monkeypatch.setattr(kind, "run", classmethod(run))


def _disk_full_line(capsys, runs: Path, suite: Path, tmp_path: Path, *extra: str) -> str:
    from benchmark.run import main

    code = main(
        [
            "--suite",
            str(suite),
            "--runs-dir",
            str(runs),
            "--results-dir",
            str(tmp_path / "results"),
            "--no-progress",
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


SIZE = r"[\d.]+ (bytes|KiB|MiB)"
NO_SPACE = (
    r"error: no space left on the device of .*/disk/runs/{kind}: stage {kind}-\w+ had written {size} when it filled "
    r"\({size} free\); it needs {need}, or pass --runs-dir on a larger disk, "
    r"and rerun the same command \(nothing of this stage was marked complete\)"
)


def test_disk_full_while_encoding_is_one_line(small_disk, tmp_path, capsys, monkeypatch):
    import re

    from benchmark.stages import Encode

    suite = tmp_path / "e.toml"
    suite.write_text(
        'name = "e"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        'max_docs = 40\nmax_queries = 5\n[splade]\nbackbones = ["bert-tiny"]\n'
        "[encode]\nmax_doc_length = 32\nmax_query_length = 16\nshard_size = 8\n"
    )
    _filled_before(monkeypatch, Encode, leave=640 * 1024)  # two shards fit (each with 240 KiB of stats), not all
    runs = small_disk / "runs"
    line = _disk_full_line(capsys, runs, suite, tmp_path)
    assert re.fullmatch(
        NO_SPACE.format(kind="encode", size=SIZE, need=rf"about {SIZE} in all: free {SIZE} more there"), line
    ), line
    assert not list((runs / "encode").glob("encode-*")), "a stage was published on a full disk"


def test_disk_full_while_indexing_is_one_line_not_an_unreadable_index(small_disk, tmp_path, capsys, monkeypatch):
    """Anserini logs "No space left on device" and exits 0; the index is then not readable. The line
    must say that the disk is full and how much the index needs, not suggest --force."""
    import re

    from benchmark.stages import Index

    suite = tmp_path / "b.toml"
    suite.write_text(
        'name = "b"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        "max_docs = 600\nmax_queries = 5\n[bm25]\n"
    )
    _filled_before(monkeypatch, Index, leave=16 * 1024)
    runs = small_disk / "runs"
    line = _disk_full_line(capsys, runs, suite, tmp_path)
    assert "--force" not in line and "readable" not in line, line
    assert re.fullmatch(
        NO_SPACE.format(kind="index", size=SIZE, need=rf"about {SIZE} in all: free {SIZE} more there"), line
    ), line
    assert not list((runs / "index").glob("index-*")), "a stage was published on a full disk"


# --------------------------------------------------------------------------- the results folder, whole

KILLED_WHILE_PUBLISHING = """
import os, signal, sys
from benchmark.report import latex
def document(*args, **kwargs):  # the run dies after results.json, metrics.csv and table.md are written
    os.kill(os.getpid(), signal.SIGKILL)
latex.document = document
from benchmark.run import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_kill_while_writing_the_tables_leaves_the_earlier_folder_whole(tmp_path):
    """The suite's folder is built beside its place and swapped in: a kill halfway through leaves every
    file of the earlier run, not a new results.json and table.md beside an old table.tex and page."""
    from helpers.beir import beir_folder

    folder = beir_folder(tmp_path / "mini")
    suite = tmp_path / "s.toml"
    argv = [
        "--suite",
        str(suite),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "results"),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    suite.write_text(f'name = "s"\ndescription = "first"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n[bm25]\n')
    first = subprocess.run(
        [sys.executable, "-m", "benchmark.run", *argv], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )
    assert first.returncode == 0, first.stderr
    published = tmp_path / "results" / "s"
    before = {p.relative_to(published): p.read_bytes() for p in published.rglob("*") if p.is_file()}
    suite.write_text(suite.read_text().replace('"first"', '"second"'))  # new tables, same stages
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_PUBLISHING, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after = {p.relative_to(published): p.read_bytes() for p in published.rglob("*") if p.is_file()}
    assert after == before
    # the killed run's staging folder stays, hidden (python -m benchmark.report skips it)
    assert [p.name for p in (tmp_path / "results").iterdir() if not p.name.startswith(".")] == ["s"]
