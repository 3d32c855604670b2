"""Run files given with ``--run``: each keeps its own TREC tag and its own MTEB export (none overwrites
another), and a run whose query ids match no judged query is refused in one line before any stage runs."""

from __future__ import annotations

import gzip
import json

from benchmark.report.results import ConditionResult, run_tag
from helpers.pipeline import run_cli

COMMON = ["--datasets", "cranfield", "--max-queries", "20", "--set", "k=1000"]


def test_every_row_has_its_own_run_tag():
    def tag(**fields) -> str:
        return run_tag(ConditionResult(key="k", dataset="d", **fields))

    assert tag(system="run", variant="a") == "run.a"
    assert tag(system="run", variant="b") == "run.b"
    assert tag(system="published", backbone="naver/splade-v3") == "published.naver_splade-v3"
    assert tag(system="bm25") == "bm25"
    assert tag(system="splade", backbone="bert-tiny", variant="baseline") == "splade.bert-tiny.baseline.untrained"


def test_two_run_files_keep_their_tags_and_exports(tmp_path, capsys):
    """BM25's run given back twice, once cut to its top 10: three rows, three tags, three MTEB files."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    dirs = ["--runs-dir", str(runs), "--results-dir", str(results)]
    assert run_cli(*COMMON, *dirs) == 0
    from benchmark.data.datasets import judged_query_ids
    from benchmark.formats import query_texts

    (topics,) = (runs / "topics").glob("topics-*")
    assert {q.query_id for q in query_texts.read_queries(topics / query_texts.QUERIES)} == judged_query_ids(
        "cranfield", 20
    )  # what the refusal checks against
    (search,) = (runs / "search").glob("search-*")
    lines = (search / "run.trec").read_text().splitlines()
    full, top10 = tmp_path / "full.trec", tmp_path / "top10.trec"
    full.write_text("".join(line.rsplit(" ", 1)[0] + " mine\n" for line in lines))
    top10.write_text("".join(line.rsplit(" ", 1)[0] + " mine\n" for line in lines if int(line.split()[3]) <= 10))
    capsys.readouterr()
    assert run_cli(*COMMON, *dirs, "--run", f"a={full}", "--run", f"b={top10}") == 0
    (folder,) = [p for p in results.iterdir() if p.name.endswith("run=a,run=b")]
    data = json.loads((folder / "results.json").read_text())
    by_tag = {}
    for c in data["conditions"]:
        with gzip.open(folder / c["run_file"], "rt") as fh:
            tags = {line.split()[5] for line in fh}
        by_tag[tags.pop()] = c
        assert not tags  # one tag per file
    assert sorted(by_tag) == ["bm25", "run.a", "run.b"]
    assert by_tag["run.a"]["metrics"] == by_tag["bm25"]["metrics"]  # the same ranking, scored the same
    assert by_tag["run.b"]["metrics"]["R@1000"] < by_tag["run.a"]["metrics"]["R@1000"]  # cut to 10: less recall
    exports = sorted(str(p.relative_to(folder)) for p in (folder / "mteb").rglob("*.json"))
    assert exports == ["mteb/bm25/cranfield.json", "mteb/run.a/cranfield.json", "mteb/run.b/cranfield.json"]
    for tag, c in by_tag.items():  # each export holds its own row's scores
        scores = json.loads((folder / "mteb" / tag / "cranfield.json").read_text())["scores"]["test"][0]
        assert scores["ir_measures"] == c["metrics"], tag
    page = (folder / "index.html").read_text()
    assert all(f"mteb/{tag}/cranfield.json" in page for tag in by_tag)


def test_a_run_that_matches_no_judged_query_is_refused_before_work(tmp_path, capsys):
    run = tmp_path / "other.trec"
    run.write_text("q-elsewhere-1 Q0 1 1 2.5 t\nq-elsewhere-2 Q0 2 1 1.5 t\n")
    runs = tmp_path / "runs"
    assert (
        run_cli(*COMMON, "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results"), "--run", f"other={run}")
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert err.startswith(
        f"error: run file {str(run)!r} (other) ranks 2 query id(s), e.g. 'q-elsewhere-1', and none "
        "is a judged query of cranfield (the 20 kept by --max-queries), e.g. "
    )
    assert err.rstrip().endswith(
        "it would score 0 everywhere; it was made on other queries, or its ids are written differently"
    )
    assert not runs.exists() or not any(runs.rglob("config.json"))  # before any stage


def test_a_run_with_some_judged_queries_is_scored(tmp_path):
    """One judged query is enough: the others score 0, as trec_eval -c counts a query the run lacks."""
    from benchmark.data.datasets import judged_query_ids
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.pipeline.preflight import run_query_problems
    from benchmark.suites.adhoc import load_adhoc

    judged = sorted(judged_query_ids("cranfield", 20))
    assert len(judged) == 20
    run = tmp_path / "one.trec"
    run.write_text(f"{judged[0]} Q0 1 1 2.5 t\nnot-judged Q0 1 1 2.5 t\n")
    plan = build_plan(
        load_adhoc(["cranfield"], None), Options(datasets=["cranfield"], max_queries=20, runs=(("one", str(run)),))
    )
    assert run_query_problems(plan) == []
    run.write_text("not-judged Q0 1 1 2.5 t\n")
    assert len(run_query_problems(plan)) == 1
