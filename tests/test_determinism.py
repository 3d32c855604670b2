"""Two runs from scratch, training included, give identical metrics (CPU, same thread count)."""

from __future__ import annotations

from conftest import run_cli

SUITE = """name = "det"
description = "determinism"
datasets = ["beir/scifact/test"]
measures = ["nDCG@10", "RR@10"]
[splade]
backbones = ["bert-tiny"]
recipe = "ci"
[encode]
max_doc_length = 64
max_query_length = 24
"""


def test_two_runs_from_scratch_give_identical_metrics(tmp_path):
    suite = tmp_path / "det.toml"
    suite.write_text(SUITE)
    outputs = []
    for n in (1, 2):
        assert run_cli("--suite", str(suite), "--max-docs", "300", "--max-queries", "15", "--threads", "2",
                       "--runs-dir", str(tmp_path / f"runs{n}"), "--results-dir", str(tmp_path / f"res{n}")) == 0
        outputs.append((tmp_path / f"res{n}" / "det" / "metrics.csv").read_text())
    assert outputs[0] == outputs[1]
    assert "splade" in outputs[0] and ",True," in outputs[0]  # the trained system is in there
