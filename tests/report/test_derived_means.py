"""Means are derived, never read: every table, page, check verdict, frame and model card takes a mean from
the per-query values (``perquery.csv.gz``), and ``results.json``'s means, written for readers, are checked
against them on every read. The committed smoke folder's BM25 nDCG@10 is 0.6789 over its 300 queries."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from benchmark.report.report_cli import main as report_main
from benchmark.report.results import read_results
from helpers import ROOT

SMOKE = ROOT / "results" / "smoke"


def _edited(tmp_path: Path, value: float = 0.1234) -> Path:
    """A received smoke folder whose results.json gives BM25's nDCG@10 as ``value``."""
    folder = tmp_path / "results" / "smoke"
    shutil.copytree(SMOKE, folder)
    data = json.loads((folder / "results.json").read_text())
    [bm25] = [c for c in data["conditions"] if c["system"] == "bm25"]
    bm25["metrics"]["nDCG@10"] = value
    (folder / "results.json").write_text(json.dumps(data, indent=1))
    return folder


def test_the_committed_folders_means_are_their_per_query_values_means(capsys):
    for name in ("smoke", "paper-mini", "scale-sweep"):
        read_results(SMOKE.parent / name)
    assert capsys.readouterr().err == ""  # no mismatch in any committed folder


def test_report_names_a_recorded_mean_its_values_disagree_with_and_uses_the_values(tmp_path, capsys):
    folder = _edited(tmp_path)
    capsys.readouterr()
    assert report_main(["--results-dir", str(folder.parent)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"warning: {folder / 'results.json'} gives nDCG@10 = 0.1234 for bm25 on beir/scifact/test, but its 300 "
        "per-query values in perquery.csv.gz average 0.6789; the per-query values are used (rewrite results.json "
        "with --refresh)"
    ]
    table = (folder / "table.md").read_text()
    assert "| BM25 | **0.6789** (ref 0.6789 [OK]) |" in table and "0.1234" not in table  # the reference beside it
    with open(folder / "metrics.csv", newline="") as fh:
        [row] = [r for r in csv.DictReader(fh) if r["system"] == "bm25" and r["measure"] == "nDCG@10"]
    assert (round(float(row["value"]), 4), row["queries"]) == (0.6789, "300")
    page = (folder / "index.html").read_text()
    assert "0.1234" not in page and "0.6789" in page
    # the page's check verdict: 2CR's 0.6789, OK on the per-query mean (it was FAIL on 0.1234)
    checks = page.split('id="checks"', 1)[1].split("</table>")[0]
    assert "3 OK, 0 OKish, 0 FAIL" in checks
    assert "<td>bm25</td><td>nDCG@10</td><td>0.6789 (±0.0005, okish ±0.001)</td><td>0.6789</td>" in checks


def test_the_frames_and_the_results_take_the_per_query_mean(tmp_path, capsys):
    from benchmark.report.frames import load_results

    folder = _edited(tmp_path, 0.9999)
    results = read_results(folder)
    [bm25] = [c for c in results.conditions if c.system == "bm25"]
    assert round(bm25.metrics["nDCG@10"], 4) == 0.6789 and bm25.queries == 300
    frames = load_results(folder)
    value = frames.scores.query("system == 'bm25' and measure == 'nDCG@10'")["value"].item()
    assert round(value, 4) == 0.6789
    assert "0.9999" in capsys.readouterr().err
