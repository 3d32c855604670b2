"""Kill-anywhere harness: SIGKILL ``python -m benchmark.run`` at named points, rerun, and require the
metrics of an uninterrupted run.

CI runs a few points (tests/system/test_kill.py). The full set, training included:
    python tests/helpers/kill_harness.py --all
Kill points are ``benchmark.common.kill_points.point`` names; ``name#n`` kills at the n-th pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SUITE = """name = "kill"
description = "BM25 + SPLADE bert-tiny on a SciFact slice"
datasets = ["beir/scifact/test"]
measures = ["nDCG@10", "RR@10", "R@100"]
max_docs = 450
max_queries = 20
[bm25]
[splade]
backbones = ["bert-tiny"]
{train}
[encode]
max_doc_length = 96
max_query_length = 32
shard_size = 150
"""

# Spread over every stage; '#n' = the n-th time the point is passed.
CI_POINTS = ["train:checkpoint", "encode:shard#2", "index:built", "search:written", "stage:publish#2"]
ALL_POINTS = [
    "data:corpus",
    "backbone:saved",
    "encode:shard",
    "encode:shard#2",
    "encode:queries",
    "index:built",
    "index:built#2",
    "search:written",
    "search:written#2",
    "evaluate:written",
    "stage:publish#3",
    "stage:publish#7",
    "train:checkpoint",
    "train:checkpoint#2",
    "train:saved",
]


def run(suite: Path, runs: Path, results: Path, kill_at: str | None = None, extra: list[str] = ()) -> int:
    env = dict(os.environ)
    env.pop("BENCHMARK_KILL_AT", None)
    if kill_at:
        env["BENCHMARK_KILL_AT"] = kill_at
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "--suite",
        str(suite),
        "--runs-dir",
        str(runs),
        "--results-dir",
        str(results),
        "--no-progress",
        "--threads",
        "1",
        *extra,
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode


def metrics(results: Path) -> str:
    from helpers import outcomes_csv

    return outcomes_csv(results / "kill" / "metrics.csv")


def check_points(points: list[str], work: Path, train: bool = False) -> dict[str, str]:
    """Returns point → 'identical' | 'not reached' | a mismatch description."""
    suite = work / "kill.toml"
    suite.write_text(SUITE.format(train='recipe = "ci"\nuntrained = true' if train else ""))
    ref_runs, ref_results = work / "ref-runs", work / "ref-results"
    assert run(suite, ref_runs, ref_results) == 0
    reference = metrics(ref_results)
    verdicts = {}
    for point in points:
        runs, results = work / f"runs-{point}", work / f"results-{point}"
        code = run(suite, runs, results, kill_at=point)
        if code == 0:
            verdicts[point] = "not reached"
            continue
        assert run(suite, runs, results) == 0
        verdicts[point] = (
            "identical" if metrics(results) == reference else f"differs:\n{metrics(results)}\nvs\n{reference}"
        )
        shutil.rmtree(runs, ignore_errors=True)
    return verdicts


def check_chain(points: list[str], work: Path) -> list[str]:
    """Cheaper, for CI: one runs folder killed at each point in turn (each rerun resumes the last),
    then a final uninterrupted rerun. Returns the points that were reached; raises if metrics differ."""
    suite = work / "kill.toml"
    suite.write_text(SUITE.format(train='recipe = "ci"'))
    ref_results = work / "ref-results"
    assert run(suite, work / "ref-runs", ref_results) == 0
    runs, results = work / "runs", work / "results"
    reached = [p for p in points if run(suite, runs, results, kill_at=p) != 0]
    assert run(suite, runs, results) == 0
    if metrics(results) != metrics(ref_results):
        raise AssertionError(
            f"metrics differ after kills at {reached}:\n{metrics(results)}\nvs\n{metrics(ref_results)}"
        )
    return reached


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--all", action="store_true", help="every kill point, with training")
    p.add_argument("--points", help="comma-separated kill points")
    args = p.parse_args()
    points = args.points.split(",") if args.points else (ALL_POINTS if args.all else CI_POINTS)
    with tempfile.TemporaryDirectory() as tmp:
        verdicts = check_points(points, Path(tmp), train=args.all or any(p.startswith("train") for p in points))
    for point, verdict in verdicts.items():
        print(f"{'[OK]  ' if verdict == 'identical' else '[FAIL]'} {point}: {verdict}")
    return 0 if all(v == "identical" for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tests"))  # as a script: tests/ holds the helpers package (metrics)
    sys.exit(main())
