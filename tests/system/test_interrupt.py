"""Interrupting a run (SIGTERM, SIGINT) stops its children, prints one line and leaves a resumable runs/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow  # a pipeline subprocess (JVM) interrupted and resumed

SUITE = (
    'name = "term"\ndescription = "BM25 on SciFact"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
)


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
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "--suite",
        str(suite),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "results"),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN: give the
    # run the default disposition a terminal gives it, however pytest itself was started.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    indexer, deadline = [], time.monotonic() + 240
    while not indexer and time.monotonic() < deadline and proc.poll() is None:
        indexer = [p for p in _children(proc.pid) if "io.anserini.index.IndexCollection" in _cmdline(p)]
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


PLOT_UNDER_SIGTERM = """
import os, signal, sys
from pathlib import Path
import matplotlib.axes
from benchmark.common.signals import Interrupted, install_signal_handlers
from benchmark.training.telemetry import plot_png

install_signal_handlers()
real = matplotlib.axes.Axes.plot
def plot(self, *args, **kwargs):  # the signal lands while the first panel is drawn
    if not getattr(plot, "sent", False):
        plot.sent = True
        os.kill(os.getpid(), signal.SIGTERM)
    return real(self, *args, **kwargs)
matplotlib.axes.Axes.plot = plot
rows = [{"step": s, "loss": 1.0 / s, "nnz_q": 3 * s, "nnz_d": 9 * s, "head_norm": 2.5} for s in range(1, 9)]
try:
    plot_png(rows, Path(sys.argv[1]), "interrupted")
except Interrupted as exc:
    print("raised", exc, "after the plot:", Path(sys.argv[1]).stat().st_size > 0)
    sys.exit(143)
print("not interrupted")
"""


def test_sigterm_while_the_telemetry_plot_is_drawn_is_raised_after_it(tmp_path):
    """matplotlib is not safe against an exception at any bytecode (an interrupt inside its drawing
    surfaced as an IndexError traceback, or was swallowed by a weakref callback and lost): the plot is
    drawn whole and the SIGTERM raised right after, as Interrupted, which the run reports in one line."""
    png = tmp_path / "telemetry.png"
    proc = subprocess.run(
        [sys.executable, "-c", PLOT_UNDER_SIGTERM, str(png)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 143, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "raised SIGTERM after the plot: True", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(tmp_path.glob(".tmp-*"))


JVM_FIRST = (
    'name = "jvm"\ndescription = "BM25 (the JVM starts in the process), then SPLADE encoding"\n'
    'datasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\nmax_docs = 1500\nmax_queries = 10\n[bm25]\n'
    '[splade]\nbackbones = ["bert-tiny"]\n[encode]\nmax_doc_length = 256\nmax_query_length = 32\n'
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_after_the_jvm_started_in_the_process_is_pythons(tmp_path, signum):
    """BM25 search and index statistics start a JVM inside the process (pyjnius); by default it takes
    SIGINT and SIGTERM over, and an interrupt while encoding then ran Java's exit: no line, claims left
    held, and often a SIGSEGV in libtorch reported as ``hs_err_pid*.log`` in the working folder. The
    signal must stay Python's: the usual line, 128 + signum, no hs_err file, no claim, and a rerun
    that finishes."""
    suite = tmp_path / "jvm.toml"
    suite.write_text(JVM_FIRST)
    work = tmp_path / "cwd"  # where a JVM would write its hs_err_pid*.log
    work.mkdir()
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "--suite",
        str(suite),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "results"),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # the BM25 condition runs first: its search starts the JVM in the process
        seen.append(line)
        if line.startswith("[run] encode-"):
            break
    assert any(line.startswith("[done] search-") for line in seen), "".join(seen)
    time.sleep(1.0)  # inside the encoding
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    seen.append(out)
    assert "[done] encode-" not in out, out  # the signal landed while encoding
    assert proc.returncode == 128 + signum, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    name = signal.Signals(signum).name
    assert lines[-1] == f"interrupted ({name}): finished stages are kept; rerun the same command to resume", err
    assert "Traceback" not in err and "fatal error" not in err, err
    assert not list(work.iterdir()), list(work.iterdir())  # no hs_err_pid*.log
    assert not [p for p in (tmp_path / "runs").rglob("*") if ".claim." in p.name]
    rerun = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
