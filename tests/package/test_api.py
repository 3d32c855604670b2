"""The Python API: ``benchmark.evaluate`` gives 2CR's BM25 on SciFact through the CLI's stages and cache,
the smoke page's BM25 row command gives the row's number, the notebook example of docs/python-api.md runs
as printed, and the frames' pivot of docs/published-models.md gives the table's means."""

from __future__ import annotations

import csv
import html
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from helpers import ROOT
from helpers.pipeline import run_cli

#: Pyserini 2CR BEIR bm25-flat on SciFact (tests/retrieval/test_bm25.py), published at 4 decimals
SCIFACT_BM25 = {"nDCG@10": 0.6789, "R@100": 0.9253, "R@1000": 0.9767}


def test_import_benchmark_loads_no_heavy_module():
    code = (
        "import sys, benchmark; f = benchmark.evaluate, benchmark.load_results; "
        "print(sorted(m for m in ('torch', 'pyserini', 'pandas', 'transformers', 'ir_measures') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_system_argv_maps_each_kind_of_system(tmp_path: Path):
    from benchmark.api import system_argv

    run = tmp_path / "my run.trec.gz"
    run.write_text("")
    assert system_argv("bm25") == ["--systems", "bm25"]
    assert system_argv("splade") == ["--systems", "splade"]
    assert system_argv(run) == ["--systems", "run", "--run", f"my-run={run}"]
    assert system_argv("naver/splade-v3") == ["--systems", "published", "--published", "naver/splade-v3"]
    assert system_argv(str(tmp_path)) == ["--systems", "published", "--published", str(tmp_path)]


def test_a_bad_measure_is_one_line_before_any_work(tmp_path: Path):
    import benchmark

    with pytest.raises(BenchmarkError) as exc:
        benchmark.evaluate("bm25", "beir/scifact/test", measures=["nDGC@10"], runs_dir=tmp_path / "runs")
    assert "nDGC@10" in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "runs").exists()


def test_the_frames_pivot_of_the_docs_gives_the_tables_means():
    import benchmark

    text = (ROOT / "docs" / "published-models.md").read_text(encoding="utf-8")
    assert 'ndcg = frames.scores[frames.scores["measure"] == "nDCG@10"]' in text
    frames = benchmark.load_results(ROOT / "results" / "smoke")
    ndcg = frames.scores[frames.scores["measure"] == "nDCG@10"]
    means = ndcg.pivot_table(index="row", columns="dataset", values="value", aggfunc="mean")["beir/scifact/test"]
    # the committed table.md's nDCG@10 column
    assert means.round(4).to_dict() == {
        "BM25": 0.6789,
        "SPLADE bert-tiny baseline": 0.6592,
        "SPLADE bert-tiny baseline (untrained)": 0.6436,
    }
    # every measure at once averages the recalls in: the old example's 0.8066 for BM25
    every = frames.scores.pivot_table(index="row", columns="dataset", values="value", aggfunc="mean")
    assert round(every.loc["BM25", "beir/scifact/test"], 4) == 0.8066


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One runs folder for the module, as a notebook and a terminal share ``runs/``."""
    return tmp_path_factory.mktemp("api") / "runs"


@pytest.mark.slow  # BM25 over SciFact's 5,183 documents through Lucene
def test_the_smoke_pages_bm25_row_command_reproduces_its_number(runs: Path, tmp_path: Path):
    page = (ROOT / "results" / "smoke" / "index.html").read_text(encoding="utf-8")
    row = re.search(r'<tr data-row="bm25\|\|\|untrained">.*?</tr>', page).group(0)
    command = html.unescape(re.search(r"<code>(.*?)</code>", row).group(1))
    score = float(re.search(r'data-measure="nDCG@10"><span data-field="value"[^>]*>([0-9.]+)<', row).group(1))
    assert score == 0.6789
    words = shlex.split(command)
    assert words[:2] == ["benchmark", "run"]
    out = tmp_path / "results"
    assert run_cli(*words[2:], "--runs-dir", str(runs), "--results-dir", str(out), "--check") == 0
    (folder,) = out.iterdir()
    with open(folder / "metrics.csv", encoding="utf-8") as fh:
        metrics = list(csv.DictReader(fh))
    assert {(m["system"], m["dataset"]) for m in metrics} == {("bm25", "beir/scifact/test")}  # that row only
    got = {m["measure"]: round(float(m["value"]), 4) for m in metrics}
    assert got["nDCG@10"] == score and {k: got[k] for k in SCIFACT_BM25} == SCIFACT_BM25


@pytest.mark.slow  # reuses the search above when run after it; else runs BM25 over SciFact
def test_evaluate_bm25_on_scifact_is_2cr(runs: Path):
    import benchmark

    scores = benchmark.evaluate("bm25", "beir/scifact/test", runs_dir=runs)
    assert list(scores.columns) == ["row", "system", "dataset", "seed", "queries", "nDCG@10", "R@100", "R@1000"]
    (line,) = scores.to_dict("records")
    assert (line["row"], line["system"], line["queries"]) == ("BM25", "bm25", 300)
    assert {m: round(line[m], 4) for m in SCIFACT_BM25} == SCIFACT_BM25
    per_query = benchmark.evaluate("bm25", "beir/scifact/test", measures=["nDCG@10"], runs_dir=runs, per_query=True)
    assert len(per_query) == 300 and set(per_query["measure"]) == {"nDCG@10"}
    # the mean over the judged queries is the aggregate (float summation: 1e-12)
    assert abs(per_query["value"].mean() - line["nDCG@10"]) < 1e-12
    # a run file: the BM25 stage's own run, evaluated as a file, gives the same scores
    search = next(p for p in (runs / "search").iterdir() if not p.name.startswith("."))
    run = next(p for p in search.iterdir() if p.name.startswith("run"))
    copy = runs.parent / ("bm25-copy" + "".join(run.suffixes))
    shutil.copy(run, copy)
    (as_file,) = benchmark.evaluate(copy, "beir/scifact/test", runs_dir=runs).to_dict("records")
    assert as_file["row"] == "bm25-copy (run file)"
    assert {m: round(as_file[m], 4) for m in SCIFACT_BM25} == SCIFACT_BM25


@pytest.mark.slow  # the notebook example: BM25 over SciFact (reused when run after the tests above)
def test_the_notebook_example_prints_what_the_docs_show(runs: Path):
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    env = {**os.environ, "BENCHMARK_RUNS_DIR": str(runs)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    printed = [line.rstrip() for line in out.stdout.splitlines() if not line.startswith("[")]
    assert printed == [line.rstrip() for line in shown.splitlines()]
