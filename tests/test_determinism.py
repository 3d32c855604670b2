"""The smoke suite on a CI slice, twice from scratch (training included): identical metrics, and the
2CR-style regression check passes (BM25 exact, SPLADE bert-tiny untrained and trained in tolerance)."""

from __future__ import annotations

import re

import pytest

from helpers.pipeline import SUBSET, run_cli

pytestmark = pytest.mark.slow  # trains the smoke suite twice


def test_smoke_twice_from_scratch_identical_and_within_expected(tmp_path, capsys):
    outputs = []
    for n in (1, 2):
        assert run_cli("--suite", "smoke", *SUBSET, "--threads", "2",
                       "--runs-dir", str(tmp_path / f"runs{n}"), "--results-dir", str(tmp_path / f"res{n}")) == 0
        # a slice given on the command line is a subset run: its own results folder
        outputs.append((tmp_path / f"res{n}" / "smoke@max-docs=600,max-queries=30" / "metrics.csv").read_text())
    assert outputs[0] == outputs[1]
    assert ",splade,bert-tiny,baseline,1,True," in outputs[0]  # the trained system is in there
    capsys.readouterr()
    assert run_cli("--suite", "smoke", *SUBSET, "--check", "--runs-dir", str(tmp_path / "runs2"),
                   "--results-dir", str(tmp_path / "res2")) == 0
    verdicts = re.findall(r"^\[(OK|OKish|FAIL)\]\s+\S+\s+(.+?)\s{2,}", capsys.readouterr().out, re.M)
    systems = {system.strip(): verdict for verdict, system in verdicts}
    assert systems["bm25"] == "OK"
    assert systems["splade bert-tiny baseline untrained"] == "OK"
    assert systems["splade bert-tiny baseline trained"] in ("OK", "OKish")
