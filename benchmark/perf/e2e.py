"""End to end: ``python -m benchmark.run --suite smoke`` on a fresh runs folder, and its time per stage kind."""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmark.common.errors import BenchmarkError
from benchmark.perf.report import Row
from benchmark.perf.workers import load


def part_e2e(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    runs, results = work / "e2e-runs", work / "e2e-results"
    for folder in (runs, results):  # a fresh run: no stage may come from a cache
        shutil.rmtree(folder, ignore_errors=True)
    load_before = load()
    t = time.perf_counter()
    log = work / "e2e.log"
    env = dict(os.environ)
    env.setdefault("BENCHMARK_MODEL_DIR", str(args.model.parent))  # the suite's "bert-tiny" backbone
    env.setdefault("HF_HUB_OFFLINE", "1")
    with open(log, "w") as fh:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmark.run",
                "--suite",
                "smoke",
                "--runs-dir",
                str(runs),
                "--results-dir",
                str(results),
                "--threads",
                str(args.threads),
                "--no-progress",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
        )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise BenchmarkError(f"smoke run failed (exit {proc.returncode}): {tail}; see {log}")
    rows = [
        Row(
            "e2e",
            "benchmark.run --suite smoke",
            wall_s=wall,
            load=f"{load_before:.1f}→{load():.1f}",
            note="total wall, fresh runs dir",
        )
    ]
    timings = results / "smoke" / "stages.csv"
    if not timings.exists():
        return rows, ["no per-stage timings: benchmark.run wrote no results/smoke/stages.csv"]
    per_kind: dict[str, list[float]] = {}
    for rec in csv.DictReader(timings.open()):
        per_kind.setdefault(rec["stage"], []).append(float(rec["seconds"]))
    for kind, secs in sorted(per_kind.items(), key=lambda kv: -sum(kv[1])):
        rows.append(
            Row(
                "e2e",
                f"stage {kind}",
                len(secs),
                sum(secs),
                note=f"{100 * sum(secs) / wall:.0f}% of the total; n = stages of this kind",
            )
        )
    return rows, []
