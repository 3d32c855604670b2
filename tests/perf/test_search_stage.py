"""``python -m benchmark.perf search-stage``: the search stage's own loop beside each engine's own time, bad
input refused in one line before any work, and the runs' scores compared across engines."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from benchmark.formats.vectors import QUERIES, Vector, write_query_vectors
from benchmark.perf.perf_cli import main
from benchmark.perf.search_stage import scores_digest

pytest.importorskip("pyterrier_pisa")  # the `engines` extra
pytest.importorskip("numba")

# ties at the k-th score (d1, d3, d4, d5 at 2 for "a"): exact engines may keep different documents there
DOCS = {"d1": {"a": 2, "b": 1}, "d2": {"a": 5}, "d3": {"a": 2}, "d4": {"a": 2}, "d5": {"a": 2, "c": 7}}
QUERY_VECTORS = {"q1": {"a": 1}, "q2": {"a": 2, "b": 3}, "q3": {"c": 1}, "none": {"zz": 4}}


def _queries(folder: Path) -> Path:
    folder.mkdir(parents=True)
    write_query_vectors(folder / QUERIES, [Vector(q, v) for q, v in QUERY_VECTORS.items()])
    return folder


def test_bad_input_is_one_line_before_any_work(tmp_path, capsys):
    queries = _queries(tmp_path / "queries")
    (tmp_path / "idx" / "lucene").mkdir(parents=True)
    out = tmp_path / "out"
    base = ["search-stage", "--queries", str(queries), "--out", str(out)]
    cases = [
        (
            ["--index", f"c={tmp_path / 'idx'}", "--engines", "lucene,pisaa"],
            "unknown search engine 'pisaa' (did you mean 'pisa'?)",
        ),
        (
            ["--index", f"c={tmp_path / 'idx'}", "--engines", "seismic:qc10-hf0.8"],
            "needs exact scores, and seismic:qc10-hf0.8 (approximate) ranks approximately; valid exact engines: "
            "lucene:exact",
        ),
        (
            ["--index", f"c={tmp_path / 'idx'}", "--engines", "lucene,exhaustive"],
            f"no exhaustive index in {tmp_path / 'idx' / 'exhaustive'}; build it with python -m benchmark.perf engines",
        ),
        (["--index", str(tmp_path / "idx"), "--engines", "lucene"], "expected NAME=FOLDER"),
        (["--engines", "lucene"], "no --index given; pass --index NAME=FOLDER"),
        (["--index", f"c={tmp_path / 'idx'}", "--index", f"c={tmp_path}", "--engines", "lucene"], "'c' is given twice"),
        (["--index", f"c={tmp_path / 'idx'}", "--engines", "lucene", "--repeat", "0"], "--repeat must be a positive"),
        (["--index", f"c={tmp_path / 'idx'}", "--engines", "lucene", "--k", "0"], "--k 0: the depth must be from 1 to"),
    ]
    for more, expected in cases:
        assert main(base + more) == 2
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err
    assert main(["search-stage", "--queries", str(tmp_path), "--index", f"c={tmp_path / 'idx'}", "--engines", "lucene"])
    assert f"--queries {tmp_path}: no {QUERIES} there" in capsys.readouterr().err
    assert not out.exists()


def test_the_scores_digest_is_each_lines_query_and_score_in_order(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d2 1 5.000000 benchmark\nq1 Q0 d9 2 2.000000 benchmark\nq2 Q0 d1 1 7.000000 x\n")
    expected = hashlib.sha256(b"q1 5.000000\nq1 2.000000\nq2 7.000000\n").hexdigest()[:16]
    assert scores_digest(run) == expected
    run.write_text("q1 Q0 d3 1 5.000000 benchmark\nq1 Q0 d4 2 2.000000 benchmark\nq2 Q0 d1 1 7.000000 x\n")
    assert scores_digest(run) == expected  # other documents at the same scores
    run.write_text("q1 Q0 d2 1 5.000000 benchmark\nq1 Q0 d9 2 3.000000 benchmark\nq2 Q0 d1 1 7.000000 x\n")
    assert scores_digest(run) != expected


@pytest.mark.slow  # a JVM builds and searches Lucene's index
def test_every_exact_engine_is_measured_on_the_stages_loop_with_the_same_scores(tmp_path):
    """Three engines on one collection at k = 2, where "q1" ties four documents at its 2nd score (2): the runs'
    scores are the same bytes. Lucene's writer is inside its own call; PISA's and exhaustive's is timed apart."""
    from benchmark.retrieval import engines

    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "part-00000.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in DOCS.items())
    )
    folder = tmp_path / "indexes" / "tiny"
    for name in ("lucene", "pisa", "exhaustive"):
        engines.choose(name).engine.build(coll, folder / name, 1)
    out = tmp_path / "out"
    argv = ["search-stage", "--queries", str(_queries(tmp_path / "queries")), "--index", f"tiny={folder}"]
    argv += ["--engines", "lucene,pisa:taat,exhaustive", "--repeat", "2", "--k", "2", "--out", str(out)]
    assert main(argv) == 0
    rows = list(csv.DictReader((out / "search-stage.csv").open()))
    assert [(r["engine"], r["repeat"]) for r in rows] == [
        (e, str(n)) for e in ("lucene", "pisa:taat", "exhaustive") for n in (1, 2)
    ]
    assert len({r["scores_sha256"] for r in rows}) == 1
    # q1: d2 5, then 2 (d1, d3, d4 or d5); q2: d2 2·5 = 10, d1 2·2 + 3·1 = 7; q3: d5 7; "none" no hit
    expected = b"q1 5.000000\nq1 2.000000\nq2 10.000000\nq2 7.000000\nq3 7.000000\n"
    assert rows[0]["scores_sha256"] == hashlib.sha256(expected).hexdigest()[:16]
    assert all(r["queries"] == "4" and float(r["engine_cpu_ms"]) > 0 and float(r["stage_cpu_ms"]) > 0 for r in rows)
    assert [r["writer_cpu_ms"] == "" for r in rows] == [True, True, False, False, False, False]
    table = (out / "search-stage.md").read_text()
    assert "Command: `python -m benchmark.perf search-stage --queries" in table
    assert "| tiny | lucene |" in table and "| in engine |" in table and "| tiny | exhaustive |" in table
