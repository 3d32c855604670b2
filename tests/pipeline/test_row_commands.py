"""Row commands as on Pyserini's 2CR pages: each row's command plans that row and no other, with the same
stage ids as the full suite's row, and ``--systems`` narrows a suite to row families without re-keying."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.run import build_parser, prepare

SLICE = ["--max-docs", "600", "--max-queries", "30"]


def _plan(argv: list[str]):
    plan, *_ = prepare(build_parser().parse_args([*argv, "--dry-run"]))
    return plan


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[:2] == ["benchmark", "run"], command
    return words[2:]


@pytest.mark.parametrize("cut", [[], SLICE], ids=["full", "slice"])
def test_every_smoke_row_command_plans_only_its_row(cut):
    plan = _plan(["--suite", "smoke", *cut])
    assert len({c.command for c in plan.conditions}) == len(plan.conditions) == 3
    for cond in plan.conditions:
        (only,) = _plan(_argv(cond.command)).conditions
        assert (only.system_key, only.dataset, only.seed) == (cond.system_key, cond.dataset, cond.seed)
        assert only.evaluate.id == cond.evaluate.id  # the same stages, so the same number


def test_the_bm25_row_command_is_2crs_form():
    bm25 = next(c for c in _plan(["--suite", "smoke"]).conditions if c.system == "bm25")
    assert bm25.command == "benchmark run --suite smoke --systems bm25 --datasets beir/scifact/test"


def test_systems_narrowing_keeps_every_stage_id():
    full = {s.id for s in _plan(["--suite", "smoke"]).stages()}
    bm25 = _plan(["--suite", "smoke", "--systems", "bm25"])
    assert [c.system for c in bm25.conditions] == ["bm25"]
    assert {s.kind.name for s in bm25.stages()} == {"topics", "corpus", "index", "search", "evaluate"}
    assert {s.id for s in bm25.stages()} <= full
    splade = _plan(["--suite", "smoke", "--systems", "splade"])
    assert {c.system for c in splade.conditions} == {"splade"} and len(splade.conditions) == 2
    assert {s.id for s in splade.stages()} <= full


def test_a_bad_systems_value_is_one_line_with_a_close_match():
    with pytest.raises(BenchmarkError) as exc:
        _plan(["--suite", "smoke", "--systems", "bm2"])
    assert "did you mean 'bm25'" in str(exc.value) and "valid: bm25, run, published, splade" in str(exc.value)
    assert "\n" not in str(exc.value)
    with pytest.raises(BenchmarkError, match="has no such rows here .* add --published MODEL"):
        _plan(["--suite", "smoke", "--systems", "published"])


def test_local_paths_become_placeholders(tmp_path: Path):
    run = tmp_path / "mine.trec"
    run.write_text("1 Q0 4983 1 1.0 x\n")
    (cond,) = [
        c
        for c in _plan(["--datasets", "beir/scifact/test", "--systems", "run", "--run", f"mine={run}"]).conditions
        if c.system == "run"
    ]
    assert cond.command == "benchmark run --systems run --datasets beir/scifact/test --run mine=<path to mine.trec>"
    assert str(tmp_path) not in cond.command
