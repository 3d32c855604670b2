"""``--executor ray`` on a real local Ray cluster: a head and a worker node (1 CPU each), started with
``ray start`` in private network and PID namespaces so that everything binds 127.0.0.1 only
(tests/helpers/ray_cluster.py). One cluster serves three checks, to pay its start-up once:

* fault tolerance: the SciFact slice of ``untrained_splade`` (BM25 + untrained bert-tiny, 3 encode
  shards) with worker processes SIGKILLed in the middle of an encode shard (encoded, not yet
  written), in the encode stage's coordinator once a shard is finished, and in the middle of a
  search (run file written, stage not published); the suite must finish with the local executor's
  ``metrics.csv``, the retried coordinator must keep the finished shards, and the sharded encode
  stage must be the local one byte for byte;
* failure containment: a toy plan where one stage raises; its dependants are not run, the other
  branch finishes;
* Ray Train: two gloo workers (one per node) train like one process on the same global batch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import torch

from helpers import HELPERS, ROOT, outcomes_csv, ray_cluster
from helpers.ddp_worker import COMPARED, _max_relative_difference, _rows

pytestmark = pytest.mark.slow  # a local Ray cluster

ADDRESS = f"127.0.0.1:{ray_cluster.PORT}"


@pytest.fixture(scope="module")
def cluster_run(untrained_splade, tmp_path_factory) -> dict:
    prefix, why = ray_cluster.namespace()
    if prefix is None:
        pytest.skip(f"cannot create a private network namespace for the test cluster ({why})")
    from helpers.tiny_models import tiny_bert

    work = tmp_path_factory.mktemp("ray")
    init = tiny_bert(work / "models")
    config = json.loads((init / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # as tests/training/test_ddp.py
    (init / "config.json").write_text(json.dumps(config))
    (work / "kills").mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPERS)]), "OMP_NUM_THREADS": "1"}
    suite = [
        sys.executable,
        "-m",
        "benchmark.run",
        "--suite",
        str(untrained_splade["suite"]),
        "--runs-dir",
        str(work / "runs"),
        "--results-dir",
        str(work / "results"),
        "--no-progress",
        "--executor",
        "ray",
        "--ray-address",
        ADDRESS,
    ]
    checks = str(HELPERS / "ray_checks.py")
    # the same suite with one measure more: its evaluate stages run again, and fail
    more = work / "mini.toml"
    more.write_text(untrained_splade["suite"].read_text().replace('"R@100"]', '"R@100", "nDCG@5"]'))
    failing = [*suite[:4], str(more), *suite[5:]]
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    spec = {
        "nodes": [1, 1],
        "temp": temp,
        "out": str(work / "report.json"),
        "commands": [
            {
                "name": "contain",
                "argv": [sys.executable, checks, "contain", str(work / "toy-runs"), ADDRESS],
                "env": env,
                "timeout": 300,
            },
            {
                "name": "suite",
                "argv": suite,
                "timeout": 600,
                "env": {
                    **env,
                    "BENCHMARK_KILL_AT": "encode:encoded,shards:collected,search:written",
                    "BENCHMARK_KILL_ONCE": str(work / "kills"),
                },
            },
            {
                "name": "failing",
                "argv": failing,
                "timeout": 300,
                "env": {**env, "BENCHMARK_FAIL_AT": "evaluate:written"},
            },
            {
                "name": "train",
                "argv": [sys.executable, checks, "train", str(init), str(work / "two"), ADDRESS],
                "env": env,
                "timeout": 600,
            },
        ],
    }
    try:
        report = ray_cluster.run(prefix, spec, work / "spec.json", timeout=1500)
    finally:
        subprocess.run(["rm", "-rf", temp])
    assert "error" not in report, report["error"]
    report["work"], report["init"] = work, init
    report["by_name"] = {c["name"]: c for c in report["commands"]}
    return report


def _ok(report: dict, name: str) -> dict:
    command = report["by_name"][name]
    assert command["rc"] == 0, (
        f"{name} exited {command['rc']}:\n{command['stdout'][-3000:]}\n{command['stderr'][-3000:]}"
    )
    return command


def test_killed_workers_are_retried_and_the_metrics_equal_the_local_executors(cluster_run, untrained_splade):
    log = _ok(cluster_run, "suite")["stdout"]
    work = cluster_run["work"]
    kills = sorted(p.name for p in (work / "kills").iterdir())
    assert kills == ["encode_encoded#1", "search_written#1", "shards_collected#1"]  # every kill happened
    kept = [int(m) for m in re.findall(r"shard task\(s\) on .* each \((\d) of 3 already done\)", log)]
    assert kept and min(kept) >= 1, log[-3000:]  # the retried coordinator started from the finished shards
    local = outcomes_csv(untrained_splade["results"] / "metrics.csv")
    assert outcomes_csv(work / "results" / "mini" / "metrics.csv") == local

    # the sharded encode stage is the local one: same shards, stats and df.npy, same record
    (local_encode,) = (untrained_splade["runs"] / "encode").iterdir()
    ray_encode = work / "runs" / "encode" / local_encode.name
    files = sorted(p.relative_to(local_encode) for p in local_encode.rglob("*") if p.is_file())
    assert len([f for f in files if f.name.endswith(".jsonl")]) == 3  # several shards (shard_size 250)
    assert files == sorted(p.relative_to(ray_encode) for p in ray_encode.rglob("*") if p.is_file())
    for rel in files:
        if rel.name != "config.json":
            assert (ray_encode / rel).read_bytes() == (local_encode / rel).read_bytes(), rel
    meta_local, meta_ray = (json.loads((d / "config.json").read_text()) for d in (local_encode, ray_encode))
    for meta in (meta_local, meta_ray):
        for key in ("environment", "seconds", "finished"):
            meta.pop(key)
        meta["record"].pop("encoder")  # what the encoder measured (timings, chosen path): not an output
    assert meta_ray == meta_local


def test_a_failed_stage_stops_only_its_dependants(cluster_run):
    out = _ok(cluster_run, "contain")["stdout"]
    outcome = json.loads(next(line for line in out.splitlines() if line.startswith("OUTCOME "))[len("OUTCOME ") :])
    assert outcome["failed"] == {"b": "leaf 2 cannot be computed"}
    assert outcome["blocked"] == {"blocked": "b", "below": "b"}
    assert outcome["done"] == {"a": {"value": 1}, "c": {"value": 3}, "fine": {"value": 4}}
    assert "leaf 2 cannot be computed" in outcome["summary"] and "not run:" in outcome["summary"]


def test_a_failed_run_never_replaces_a_complete_results_folder(cluster_run, untrained_splade):
    """After the complete suite, a run of it whose evaluate stages fail exits 1, keeps the complete
    folder as it was (the local executor's metrics) and puts its partial tables beside it, hidden."""
    command = cluster_run["by_name"]["failing"]
    assert command["rc"] == 1, command["stderr"][-3000:]
    results = cluster_run["work"] / "results"
    assert re.search(
        rf"the complete tables in {re.escape(str(results / 'mini'))} are kept; this run's, of the finished "
        rf"conditions, are in {re.escape(str(results / '.mini.incomplete'))}",
        command["stderr"],
    ), command["stderr"]
    assert "injected failure at evaluate:written" in command["stderr"]
    assert outcomes_csv(results / "mini" / "metrics.csv") == outcomes_csv(untrained_splade["results"] / "metrics.csv")
    assert "nDCG@5" not in (results / "mini" / "table.md").read_text()
    assert (results / ".mini.incomplete" / "results.json").is_file()
    assert sorted(p.name for p in results.iterdir() if not p.name.startswith(".")) == ["mini"]


def test_two_ray_train_workers_match_one_process(cluster_run):
    from helpers.ddp_worker import run

    _ok(cluster_run, "train")
    work = cluster_run["work"]
    two = work / "two" / "global"
    run(cluster_run["init"], work / "one")
    one = work / "one" / "global"
    assert json.loads((two / "record.json").read_text())["world_size"] == 2
    rows_one, rows_two = _rows(one), _rows(two)
    assert [r["step"] for r in rows_one] == [r["step"] for r in rows_two] == [1.0, 2.0]
    # Both runs evaluate the same weights at every step (ddp_worker freezes them), so they differ only
    # in float32 summation order: the bound derived in tests/training/test_ddp.py, (n - 1)·u·Σ|x_i| for the
    # longest reduction (n = 8·16·32 = 4096 products, u = 2^-24), ×4 for cancellation.
    rtol = 4 * 4096 * 2.0**-24
    for r1, r2 in zip(rows_one, rows_two):
        for column in COMPARED:
            assert abs(r2[column] - r1[column]) <= rtol * abs(r1[column]) + 1e-7, (
                r1["step"],
                column,
                r1[column],
                r2[column],
            )
    grads_one, grads_two = (torch.load(f / "grads.pt") for f in (one, two))
    assert len(grads_one) == len(grads_two) == 2
    assert max(_max_relative_difference(g2, g1) for g1, g2 in zip(grads_one, grads_two)) < rtol


def test_the_local_executor_does_not_import_ray(untrained_splade, tmp_path):
    code = (
        "import sys; from benchmark.run import main; "
        f"rc = main(['--suite', {str(untrained_splade['suite'])!r}, '--runs-dir', {str(untrained_splade['runs'])!r}, "
        f"'--results-dir', {str(tmp_path)!r}, '--no-progress']); "
        "assert rc == 0, rc; assert 'ray' not in sys.modules, 'ray was imported'; "
        "assert not any(m.startswith('benchmark.pipeline.ray_executor') for m in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcomes_csv(tmp_path / "mini" / "metrics.csv") == outcomes_csv(untrained_splade["results"] / "metrics.csv")
