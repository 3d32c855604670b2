"""The smoke suite on the CI slice from scratch (training included): the 2CR-style regression check
passes (BM25 exact, SPLADE bert-tiny untrained and trained in tolerance).

That two runs from scratch give identical metrics is ``tests/system/test_kill.py``'s check: its reference run
and its killed-and-resumed run both start from an empty runs folder (training, encoding, indexing), and
their metrics.csv must be equal byte for byte."""

from __future__ import annotations

import re

import pytest

from helpers.pipeline import SUBSET, run_cli

pytestmark = pytest.mark.slow  # trains the smoke suite


def test_smoke_from_scratch_within_expected(tmp_path, capsys):
    common = (
        "--suite",
        "smoke",
        *SUBSET,
        "--threads",
        "2",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "res"),
    )
    assert run_cli(*common) == 0
    # a slice given on the command line is a subset run: its own results folder
    metrics = (tmp_path / "res" / "smoke@max-docs=600,max-queries=30" / "metrics.csv").read_text()
    assert ",splade,bert-tiny,baseline,1,True," in metrics  # the trained system is in there
    capsys.readouterr()
    assert run_cli(*common, "--check") == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "[run]" not in out + captured.err  # every stage was cached: the check reads what the run computed
    verdicts = re.findall(r"^\[(OK|OKish|FAIL)\]\s+\S+\s+(.+?)\s{2,}", out, re.M)
    systems = {system.strip(): verdict for verdict, system in verdicts}
    assert systems["bm25"] == "OK"
    assert systems["splade bert-tiny baseline untrained"] == "OK"
    assert systems["splade bert-tiny baseline trained"] in ("OK", "OKish")
