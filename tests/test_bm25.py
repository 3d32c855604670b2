"""BM25 through Pyserini's Lucene reproduces the published Pyserini 2CR bm25-flat score on BEIR SciFact."""

from __future__ import annotations

import csv

from conftest import run_cli

PYSERINI_2CR_SCIFACT_BM25_FLAT = 0.6789


def test_bm25_scifact_matches_pyserini_2cr(tmp_path):
    suite = tmp_path / "bm25.toml"
    suite.write_text('name = "bm25"\ndescription = "BM25 flat"\ndatasets = ["beir/scifact/test"]\n'
                     'measures = ["nDCG@10"]\n[bm25]\nk1 = 0.9\nb = 0.4\n')
    assert run_cli("--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res")) == 0
    with open(tmp_path / "res" / "bm25" / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    (row,) = rows
    assert (row["dataset"], row["system"], row["measure"]) == ("beir/scifact/test", "bm25", "nDCG@10")
    assert abs(float(row["value"]) - PYSERINI_2CR_SCIFACT_BM25_FLAT) <= 0.0005
    table = (tmp_path / "res" / "bm25" / "table.md").read_text()
    assert "| BM25 | 0.6789 |" in table
