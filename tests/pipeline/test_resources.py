"""Resources per stage kind (suite key, --resources), the Ray executor's flags, and the paper plan's
wall-time estimate on N GPUs (``--dry-run --executor ray --gpus N``). No cluster is started."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.budget import CORPORA, FIGURES, encode_seconds, estimate
from benchmark.pipeline.plan import Options, build_plan
from benchmark.pipeline.resources import Resources, parse_cli, resolve
from benchmark.stages import KINDS
from benchmark.suites import load_suite
from helpers import ROOT
from helpers.pipeline import run_cli


def test_cli_resources_parse_per_kind_and_field():
    assert parse_cli("encode=gpu:1,index=cpu:2+mem:8,train=gpu:1+cpu:4+workers:4") == {
        "encode": {"gpus": 1.0},
        "index": {"cpus": 2.0, "memory_gb": 8.0},
        "train": {"gpus": 1.0, "cpus": 4.0, "workers": 4},
    }


@pytest.mark.parametrize(
    "value, message",
    [
        ("encode", "has no KIND="),
        ("encdoe=gpu:1", "did you mean 'encode'"),
        ("encode=tpu:1", "unknown resource"),
        ("index=cpu:two", "is not a number"),
        ("index=cpu:-1", "must be a number ≥ 0"),
        ("index=workers:2", "workers applies to train only"),
        ("train=workers:0", "must be a whole number ≥ 1"),
        ("encode=gpu:1.5", "above 1 it must be a whole number"),
    ],
)
def test_bad_cli_resources_are_one_line_errors(value, message):
    with pytest.raises(BenchmarkError, match=message) as info:
        parse_cli(value)
    assert "\n" not in str(info.value)


def test_defaults_then_suite_then_command_line(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(
        'name = "s"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
        "[resources.index]\ncpus = 4\nmemory_gb = 16\n[resources.encode]\ncpus = 2\n"
    )
    from benchmark.suites import suite_resources

    got = resolve(
        [k for _, k in KINDS.items()],
        suite_resources(load_suite(str(suite)).resources),
        parse_cli("encode=gpu:0,index=mem:32"),
    )
    assert got["index"] == Resources(cpus=4.0, memory_gb=32.0)
    assert got["encode"] == Resources(cpus=2.0, gpus=0.0)
    assert got["train"] == got["queries"] == Resources(cpus=1.0, gpus=1.0)  # the GPU kinds' default
    assert got["search"] == got["evaluate"] == got["corpus"] == Resources(cpus=1.0)
    assert got["index"].threads == 4


def test_a_suite_with_an_unknown_resources_kind_is_rejected_on_load(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(
        'name = "s"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
        "[resources.indx]\ncpus = 4\n"
    )
    with pytest.raises(BenchmarkError, match="did you mean 'index'"):
        load_suite(str(suite))


def test_ray_flags_need_the_ray_executor(capsys):
    assert run_cli("--suite", "smoke", "--dry-run", "--resources", "index=cpu:2") == 2
    assert "applies to the Ray executor; add --executor ray" in capsys.readouterr().err


def test_the_paper_plan_estimate_on_1_8_64_gpus():
    plan = build_plan(load_suite("paper"), Options())
    trains = [s for s in plan.stages() if s.kind.name == "train"]
    backbones = [s.parents["init"].config.backbone for s in trains]
    assert len(trains) == 18  # 9 backbones × 2 variants: the projection × 1/16 for every backbone, bert-base included
    # GPU work: the README's per-step times over 150k steps, plus each model's encode time over its corpora
    for end in (0, 1):
        expected = sum(150_000 * FIGURES[b].train_step_s[end] / 3600 for b in backbones)
        expected += sum(encode_seconds(b, c, end) for b in backbones for c in CORPORA) / 3600
        got = estimate(plan, 1).gpu_hours[end]
        assert math.isclose(got, expected, rel_tol=1e-9), (got, expected)  # float sums in another order: ~1e-12
    one, eight, many = (estimate(plan, n) for n in (1, 8, 64))
    # one GPU never idles (the trainings are queued from the start), so the wall time is the work
    assert all(math.isclose(w, g, rel_tol=1e-9) for w, g in zip(one.wall_hours, one.gpu_hours))
    for est in (one, eight, many):
        for k in (0, 1):
            assert est.wall_hours[k] >= max(est.critical_hours[k], est.gpu_hours[k] / est.gpus) * (1 - 1e-9)
    assert one.wall_hours[0] > eight.wall_hours[0] > many.wall_hours[0]
    # with 64 GPUs every training has its own: the longest one (ettin-1b) and its longest shard decide
    crit = 150_000 * FIGURES["ettin-1b"].train_step_s[0]
    assert "train ettin-1b" in many.critical_path
    assert crit / 3600 < many.critical_hours[0] < crit / 3600 + 1


def test_encode_figures_are_the_readmes_two_totals():
    for backbone, figures in FIGURES.items():
        total = sum(encode_seconds(backbone, c, 1) for c in CORPORA)  # the paper's 14 corpus stages
        assert math.isclose(total, figures.encode_hours * 3600, rel_tol=1e-12)  # 14 float terms: error ~1e-15
    # the throughput buckets give the low end of the README's encoding total (140 GPU-h for the 17 models;
    # 9 backbones × 2 variants here, bert-base-uncased's rescaled included)
    low = 2 * sum(encode_seconds(b, c, 0) for b in FIGURES for c in CORPORA) / 3600
    assert 130 <= low <= 160, low
    assert encode_seconds("bert-tiny", "beir/scifact") is None


def test_the_readme_and_the_budget_page_give_the_dry_runs_gpu_hours():
    """The README and docs/compute-budget.md once said 366–638 GPU-hours (17 trainings) where the dry run
    counts the plan's 18: both now give the estimate of the paper plan as it is."""
    est = estimate(build_plan(load_suite("paper"), Options()), 1)
    lo, hi = (round(h) for h in est.gpu_hours)
    readme = (ROOT / "README.md").read_text()
    budget = (ROOT / "docs" / "compute-budget.md").read_text()
    assert f"needs about {lo}–{hi} H200 GPU-hours" in readme
    assert f"altogether {lo}–{hi} GPU-hours" in budget
    assert "366–638" not in readme + budget


def test_dry_run_with_the_ray_executor_prints_the_estimate_without_ray():
    code = (
        "import sys; from benchmark.run import main; "
        "rc = main(['--suite', 'paper', '--dry-run', '--executor', 'ray', '--gpus', '8', '--resources', "
        "'index=cpu:8']); "
        "assert rc == 0; assert 'ray' not in sys.modules"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "estimate on 8 GPU(s)" in proc.stdout and "critical path: mining (CPU) → train ettin-1b" in proc.stdout
    assert "index 8 CPU" in proc.stdout and "encode 1 GPU + 1 CPU" in proc.stdout
