"""One measured system per fresh subprocess: ``spawn`` in the parent, ``worker`` in the child.

A worker reads a JSON spec, runs the function its ``kind`` names (``KINDS``) and writes a JSON
result beside the spec; peak RSS is the child's own VmHWM.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError

#: spec ``kind`` → "module:function" run in the child with the spec; returns the result dict
KINDS = {"encode": "benchmark.perf.encode_speed:encode_worker", "train": "benchmark.perf.train_speed:train_worker"}


def status_mb(key: str) -> float:
    """A ``/proc/self/status`` memory field (VmRSS, VmHWM) in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load() -> float:
    """The 1-minute load average (other processes slow wall time on a shared machine)."""
    return os.getloadavg()[0]


def worker(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    module, _, func = KINDS[spec["kind"]].partition(":")
    result = getattr(importlib.import_module(module), func)(spec)
    result.setdefault("peak_mb", status_mb("VmHWM"))
    Path(spec["out"]).with_suffix(".json").write_text(json.dumps(result))
    return 0


def spawn(spec: dict[str, Any], work: Path, name: str) -> dict[str, Any]:
    """Run ``spec`` in a fresh ``python -m benchmark.perf --worker`` process; its result dict."""
    spec_path = work / f"{name}.spec.json"
    spec = {**spec, "out": str(work / name)}
    spec_path.write_text(json.dumps(spec))
    threads = str(spec["threads"])
    env = dict(
        os.environ,
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    log = work / f"{name}.log"
    load_before = load()
    with open(log, "w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmark.perf", "--worker", str(spec_path)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    if proc.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise BenchmarkError(f"perf worker {name!r} failed (exit {proc.returncode}): {tail}; see {log}")
    result = json.loads((work / f"{name}.json").read_text())
    result["load"] = (load_before, load())
    return result
