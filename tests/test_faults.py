"""benchmark.faults: named kill points, several at once, and once across processes (BENCHMARK_KILL_ONCE)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASSES = "from benchmark import faults\nfor name in ['a', 'b', 'a', 'b', 'a']:\n    print(name, flush=True)\n    faults.point(name)\n"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PASSES], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


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
