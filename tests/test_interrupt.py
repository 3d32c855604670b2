"""Interrupting a run (SIGTERM, SIGINT) stops its children, prints one line and leaves a resumable runs/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pipeline subprocess (JVM) interrupted and resumed

ROOT = Path(__file__).resolve().parents[1]
SUITE = ('name = "term"\ndescription = "BM25 on SciFact"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
         '[bm25]\n')


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_during_indexing_leaves_no_child_and_resumes(tmp_path, signum):
    suite = tmp_path / "term.toml"
    suite.write_text(SUITE)
    cmd = [sys.executable, "-m", "benchmark.run", "--suite", str(suite), "--runs-dir", str(tmp_path / "runs"),
           "--results-dir", str(tmp_path / "results"), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN: give the
    # run the default disposition a terminal gives it, however pytest itself was started.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    indexer, deadline = [], time.monotonic() + 240
    while not indexer and time.monotonic() < deadline and proc.poll() is None:
        indexer = [p for p in _children(proc.pid) if "pyserini.index.lucene" in _cmdline(p)]
        time.sleep(0.05)
    assert indexer, "the indexer never started"
    time.sleep(0.5)  # let the JVM get going
    family = _children(proc.pid)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    name = signal.Signals(signum).name
    assert lines[-1] == f"interrupted ({name}): finished stages are kept; rerun the same command to resume"
    assert "Traceback" not in err
    time.sleep(1.0)
    assert [p for p in family if _alive(p)] == []  # the JVM indexer died with the run
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600).returncode == 0
    assert (tmp_path / "results" / "term" / "metrics.csv").read_text().count("0.6789") == 1
