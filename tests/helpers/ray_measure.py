"""Measure the Ray executor against the local one on this machine (not run by pytest).

    python tests/helpers/ray_measure.py overhead WORK [1]  # the smoke suite's CI slice: Ray (1 node, 2 CPUs), then
                                                           # local (with 1: one thread, as each Ray task has)
    python tests/helpers/ray_measure.py scaling WORK    # SciFact's 5,183 documents encoded by 1 and 2 CPU workers

Wall seconds, CPU seconds (of everything started, Ray's daemons included: a cgroup v1 cpuacct
folder holds this process and its descendants) and, under Ray, the CPU seconds of Ray's own daemons
(GCS, raylets, agents). Clusters run in private namespaces, bound to 127.0.0.1 (tests/helpers/ray_cluster.py).
Prints one JSON object; the load average goes with it (the machine may be shared).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray_cluster

HELPERS = Path(__file__).resolve().parent
ROOT = HELPERS.parents[1]
ADDRESS = f"127.0.0.1:{ray_cluster.PORT}"
SMOKE = ["--suite", "smoke", "--max-docs", "600", "--max-queries", "30", "--no-progress"]
SCALING_SUITE = """name = "scaling"
description = "untrained bert-tiny encodes SciFact"
datasets = ["beir/scifact/test"]
measures = ["nDCG@10"]
[splade]
backbones = ["bert-tiny"]
[encode]
max_doc_length = 256
shard_size = 250
"""
ENCODE = """
import sys, time
from pathlib import Path
from benchmark.pipeline.plan import Options, build_plan
from benchmark.stages.store import Store
from benchmark.stages import Context
from benchmark.suites import load_suite


def main():
    plan = build_plan(load_suite(sys.argv[1]), Options())
    (encode,) = [s for s in plan.stages() if s.kind.name == "encode"]
    store = Store(sys.argv[2])
    start = time.perf_counter()
    if sys.argv[3] == "local":
        import torch
        torch.set_num_threads(1)
        from benchmark.pipeline.executor import LocalExecutor
        LocalExecutor(store, Context(threads=1, progress=False)).run([encode])
    else:
        from benchmark.pipeline.ray_executor import execute
        from benchmark.pipeline.resources import resolve
        from benchmark.stages import KINDS
        execute(store, Context(progress=False), [encode], resolve([k for _, k in KINDS.items()]), set(), sys.argv[3])
    print("ENCODE", time.perf_counter() - start, store.timings.get(encode.id))


if __name__ == "__main__":  # writer processes are spawned: they import this file
    main()
"""


def _cgroup() -> Path | None:
    base = Path("/sys/fs/cgroup/cpuacct")
    if not (base / "cpuacct.usage").exists():
        return None
    folder = base / f"ray-measure-{os.getpid()}"
    folder.mkdir()
    (folder / "cgroup.procs").write_text(str(os.getpid()))
    return folder


def _cpu(cg: Path | None) -> float | None:
    return int((cg / "cpuacct.usage").read_text()) / 1e9 if cg else None


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPERS)])}


def _local(argv: list[str], cg: Path | None, env: dict[str, str] | None = None) -> dict[str, object]:
    t0, c0 = time.perf_counter(), _cpu(cg)
    proc = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env={**_env(), **(env or {})}, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return {"wall": time.perf_counter() - t0, "cpu": None if cg is None else _cpu(cg) - c0, "stdout": proc.stdout}


def _cluster(nodes: list[int], commands: list[dict[str, object]], work: Path, cg: Path | None) -> dict[str, object]:
    prefix, why = ray_cluster.namespace()
    if prefix is None:
        raise SystemExit(f"no private network namespace: {why}")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    os.environ["RAY_CLUSTER_CPUACCT"] = str(cg) if cg else ""
    try:
        spec = {"nodes": nodes, "temp": temp, "out": str(work / "report.json"), "commands": commands}
        report = ray_cluster.run(prefix, spec, work / "spec.json", timeout=3600)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    for c in report["commands"]:
        if c["rc"] != 0:
            raise RuntimeError(f"{c['name']}: {c['stderr'][-3000:]}")
    return report


def overhead(work: Path, cg: Path | None, threads: str = "") -> dict[str, object]:
    argv = [
        sys.executable,
        "-m",
        "benchmark.run",
        *SMOKE,
        "--runs-dir",
        str(work / "ray-runs"),
        "--results-dir",
        str(work / "ray-results"),
        "--executor",
        "ray",
        "--ray-address",
        ADDRESS,
    ]
    report = _cluster([2], [{"name": "smoke", "argv": argv, "env": {"PYTHONPATH": str(ROOT)}}], work, cg)
    (smoke,) = report["commands"]
    one = ["--threads", "1"] if threads == "1" else []
    local = _local(
        [
            "-m",
            "benchmark.run",
            *SMOKE,
            *one,
            "--runs-dir",
            str(work / "local-runs"),
            "--results-dir",
            str(work / "local-results"),
        ],
        cg,
        {"OMP_NUM_THREADS": "1"} if one else None,
    )
    same = (work / "local-results").joinpath("smoke@max-docs=600,max-queries=30", "metrics.csv").read_text() == (
        work / "ray-results"
    ).joinpath("smoke@max-docs=600,max-queries=30", "metrics.csv").read_text()
    return {
        "local": {k: local[k] for k in ("wall", "cpu")},
        "local_threads": threads or "default",
        "ray_startup": report["startup"],
        "ray": {k: smoke[k] for k in ("wall", "cpu", "daemon_cpu")},
        "same_metrics": same,
        "wall_overhead": smoke["wall"] / local["wall"] - 1,
    }


def scaling(work: Path, cg: Path | None) -> dict[str, object]:
    suite = work / "scaling.toml"
    suite.write_text(SCALING_SUITE)
    script = work / "encode.py"
    script.write_text(ENCODE)
    runs = work / "runs"
    out: dict[str, object] = {}
    local = _local([str(script), str(suite), str(runs), "local"], cg)  # computes corpus + backbone once too
    out["local_1_thread"] = {"wall": float(local["stdout"].split()[-1]), "cpu": local["cpu"]}
    for workers in (1, 2):
        shutil.rmtree(runs / "encode", ignore_errors=True)
        command = {
            "name": f"{workers}",
            "argv": [sys.executable, str(script), str(suite), str(runs), ADDRESS],
            "env": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        }
        report = _cluster([1] * workers, [command], work, cg)
        (c,) = report["commands"]
        out[f"ray_{workers}_workers"] = {
            "wall": float(c["stdout"].split("ENCODE")[-1].split()[1]),
            "stage_wall": c["wall"],
            "cpu": c["cpu"],
            "daemon_cpu": c["daemon_cpu"],
            "startup": report["startup"],
        }
    docs = 5183
    for value in out.values():
        value["docs_per_s"] = docs / value["wall"]  # type: ignore[index]
    out["speedup_2_over_1"] = out["ray_2_workers"]["docs_per_s"] / out["ray_1_workers"]["docs_per_s"]  # type: ignore[index]
    return out


def main() -> int:
    what, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    cg = _cgroup()
    load = Path("/proc/loadavg").read_text().split()[:3]
    try:
        result = {"overhead": overhead, "scaling": scaling}[what](work, cg, *sys.argv[3:])
    finally:
        if cg is not None:
            (cg.parent / "cgroup.procs").write_text(str(os.getpid()))
            cg.rmdir()
    print(
        json.dumps(
            {
                "load_before": load,
                "load_after": Path("/proc/loadavg").read_text().split()[:3],
                "cpus": os.cpu_count(),
                **result,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
