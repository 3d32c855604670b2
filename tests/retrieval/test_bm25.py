"""BM25 through Pyserini's Lucene reproduces the published bm25-flat scores (Pyserini 2CR / Anserini BEIR
v1.0.0 regressions) on BEIR SciFact and NFCorpus, and drops self-hits as 2CR does."""

from __future__ import annotations

import csv
import json

import pytest

from helpers.pipeline import run_cli

# Anserini docs/regressions/regressions-beir-v1.0.0-{scifact,nfcorpus}.flat.md (bm25-flat, k1 0.9, b 0.4,
# retrieve 1000 with -removeQuery, trec_eval -c). Published at 4 decimals; we must equal them at 4 decimals.
BM25_FLAT = {
    ("beir/scifact/test", "nDCG@10"): 0.6789,
    ("beir/scifact/test", "R@100"): 0.9253,
    ("beir/scifact/test", "R@1000"): 0.9767,
    ("beir/nfcorpus/test", "nDCG@10"): 0.3218,
    ("beir/nfcorpus/test", "R@100"): 0.2457,
    ("beir/nfcorpus/test", "R@1000"): 0.3704,
}


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_bm25_scifact_and_nfcorpus_match_2cr(tmp_path):
    suite = tmp_path / "bm25.toml"
    suite.write_text(
        'name = "bm25"\ndescription = "BM25 flat"\ndatasets = ["beir/scifact/test", "beir/nfcorpus/test"]\n'
        'measures = ["nDCG@10", "R@100", "R@1000"]\n[bm25]\nk1 = 0.9\nb = 0.4\n'
    )
    assert (
        run_cli("--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"))
        == 0
    )
    with open(tmp_path / "res" / "bm25" / "metrics.csv") as fh:
        got = {(r["dataset"], r["measure"]): float(r["value"]) for r in csv.DictReader(fh)}
    assert {k: round(v, 4) for k, v in got.items()} == BM25_FLAT
    table = (tmp_path / "res" / "bm25" / "table.md").read_text()
    assert "0.6789" in table and "0.3218" in table


def _beir_folder(root):
    """Three documents; query 'd1' is also a document (as in ArguAna and Quora, where queries come from the corpus)."""
    root.mkdir(parents=True)
    docs = [
        {"_id": "d1", "title": "", "text": "solar panels convert sunlight into electricity"},
        {"_id": "d2", "title": "", "text": "solar energy is renewable electricity from sunlight"},
        {"_id": "d3", "title": "", "text": "wind turbines"},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text(
        json.dumps({"_id": "d1", "text": "solar panels convert sunlight into electricity"}) + "\n"
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nd1\td2\t1\n")
    return root


def test_a_hit_whose_id_is_the_query_id_is_dropped(tmp_path):
    folder = _beir_folder(tmp_path / "selfhit")
    suite = tmp_path / "self.toml"
    runs = tmp_path / "runs"
    for name, extra in (
        ("on", f'[remove_query]\n"{folder}" = true\n'),
        ("off", ""),
    ):  # a local folder: off unless asked
        suite.write_text(
            f'name = "self{name}"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10", "RR@10"]\n'
            f"[bm25]\n{extra}"
        )
        assert run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "res")) == 0
    runs_by_flag = {}
    for folder_ in (runs / "search").iterdir():
        if folder_.name.startswith("."):
            continue
        meta = json.loads((folder_ / "config.json").read_text())
        runs_by_flag[meta["config"]["remove_query"]] = (folder_ / "run.trec").read_text().split("\n")[:-1]
    # without removal the query's own document ranks first; with it, the relevant d2 does
    assert [line.split()[2] for line in runs_by_flag[False]][:2] == ["d1", "d2"]
    assert [line.split()[2] for line in runs_by_flag[True]][0] == "d2" and all(
        "d1" != line.split()[2] for line in runs_by_flag[True]
    )
    with open(tmp_path / "res" / "selfon" / "metrics.csv") as fh:
        on = {r["measure"]: float(r["value"]) for r in csv.DictReader(fh)}
    with open(tmp_path / "res" / "selfoff" / "metrics.csv") as fh:
        off = {r["measure"]: float(r["value"]) for r in csv.DictReader(fh)}
    assert on["RR@10"] == 1.0 and off["RR@10"] == 0.5  # hand-computed: d2 at rank 1 vs rank 2
    assert "Self-hits removed" in (tmp_path / "res" / "selfon" / "table.md").read_text()
    assert "Self-hits removed" not in (tmp_path / "res" / "selfoff" / "table.md").read_text()
