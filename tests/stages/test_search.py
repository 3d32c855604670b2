"""The search stage copies Anserini's run lines unread where they are what ``format_run`` would write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.formats.trec_run import format_run
from benchmark.retrieval import lucene
from benchmark.stages.search import copyable, tie_printed


def _index(tmp_path: Path, docs: dict[str, dict[str, int]]) -> Path:
    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    lucene.build_impact_index(coll, tmp_path / "idx", threads=1)
    return tmp_path / "idx"


@pytest.mark.slow  # a JVM indexes and searches
def test_copied_run_lines_are_format_runs_bytes_and_the_rest_are_read(tmp_path):
    """Hand-computed scores: "plain" scores d1 = 3·2 = 6, d2 = 1·2 = 2; "self" hits its own id (5·1) and
    "d1" (3·1); "past" sums 4096·4096 + 1 past 2**24 (Lucene rounds it); "empty" has no hits. Only the
    lines that nothing would change are copied, and each copied text is format_run's for the same hits."""
    docs = {"d1": {"a": 3}, "d2": {"a": 1}, "self": {"b": 5}, "big": {"c": 4096, "d": 1}}
    queries = {
        "plain": {"a": 2},
        "self": {"b": 1, "a": 1},
        "past": {"c": 4096, "d": 1},
        "empty": {},
    }
    index = _index(tmp_path, docs)
    lines = lucene.impact_run_lines(index, queries, k=10, threads=1)
    assert list(lines) == list(queries)  # the order asked
    hits = lucene.impact_search(index, queries, k=10, threads=1)
    assert hits["plain"] == [("d1", 6.0), ("d2", 2.0)] and hits["self"] == [("self", 5.0), ("d1", 3.0), ("d2", 1.0)]
    for q in queries:
        assert "".join(lines[q]) == format_run({q: hits[q]}), q
        assert [lucene.run_line_hit(line) for line in lines[q]] == hits[q], q
    assert sorted(copyable(lines, remove_query=True)) == ["plain"]
    assert sorted(copyable(lines, remove_query=False)) == ["plain", "self"]
    assert copyable(lines, remove_query=False)["plain"] == format_run({"plain": hits["plain"]})


@pytest.mark.slow  # a JVM indexes and searches
def test_bm25_run_lines_are_format_runs_bytes(tmp_path):
    """Anserini's SearchCollection writes BM25 runs byte for byte as format_run writes bm25_search's hits
    (the same analyser, query and tie-break); a query text with a tab cannot be a TSV topic; "q2" hits its
    own id, so removing self-hits reads it, and only it, into hits."""
    coll = tmp_path / "coll"
    coll.mkdir()
    texts = {
        "d1": "sparse retrieval with learned term weights",
        "q2": "lexical retrieval and inverted indexes",
        "d3": "dense retrieval with learned embeddings of passages",
        "d4": "a note on cooking pasta",
    }
    (coll / "docs.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in texts.items()))
    lucene.build_bm25_index(coll, tmp_path / "idx", threads=1)
    queries = {"q1": "learned sparse retrieval", "q2": "inverted indexes", "stop": "the of and", "none": ""}
    lines = lucene.bm25_run_lines(tmp_path / "idx", queries, k=10, threads=1, k1=0.9, b=0.4)
    hits = lucene.bm25_search(tmp_path / "idx", queries, k=10, threads=1, k1=0.9, b=0.4)
    assert list(lines) == list(queries) and [d for d, _ in hits["q1"]][:1] == ["d1"]
    for q in queries:
        assert "".join(lines[q]) == format_run({q: hits[q]}), q
        assert format_run({q: [lucene.run_line_hit(ln, integer=False) for ln in lines[q]]}) == "".join(lines[q])
    assert tie_printed(lines) == set()
    assert sorted(copyable(lines, remove_query=True)) == ["q1"]
    assert sorted(copyable(lines, remove_query=False)) == ["q1", "q2"]
    assert lucene.bm25_run_writer_fits(queries) and not lucene.bm25_run_writer_fits({"q": "a\tb"})


def test_copyable_reads_the_top_score_from_the_first_of_a_querys_lines_in_one_string():
    """An engine's compiled writer gives a query's lines as one string: the top score is the first line's (2**24
    is past float32's exact integers, 2**24 - 1 is not), and a last line without its newline still counts."""
    lines = {
        "big": ["big Q0 d1 1 16777216.000000 benchmark\nbig Q0 d2 2 3.000000 benchmark\n"],
        "small": ["small Q0 d1 1 16777215.000000 benchmark\nsmall Q0 d2 2 3.000000 benchmark\n"],
        "bare": ["bare Q0 d1 1 5.000000 benchmark"],
    }
    assert sorted(copyable(lines, remove_query=False)) == ["bare", "small"]


def test_a_bm25_line_printed_from_a_tie_is_not_copied():
    """Java's %f printed 3.0078125 (= 385/128, halfway) as 3.007813 where format_run prints 3.007812: the
    query's lines are read again; 2.0234375 rounds to 2.023438 in both, and 3.007812 is no tie."""
    tie = "q Q0 d1 1 3.007813 benchmark\n"
    assert lucene.half_up_tie(tie) and f"{3.0078125:.6f}" == "3.007812"
    assert not lucene.half_up_tie("q Q0 d1 1 2.023438 benchmark\n") and f"{2.0234375:.6f}" == "2.023438"
    assert not lucene.half_up_tie("q Q0 d1 1 3.007812 benchmark\n")
    lines = {"q": [tie, "q Q0 d2 2 1.000000 benchmark\n"], "r": ["r Q0 d1 1 3.007812 benchmark\n"]}
    assert tie_printed(lines) == {"q"}
    assert sorted(copyable(lines, remove_query=False, unsure=tie_printed(lines))) == ["r"]


@pytest.mark.slow  # a JVM formats floats
def test_half_up_tie_finds_every_line_where_javas_f_differs_from_format_run():
    """Java's own %f (Anserini's RunOutputWriter formats a Float with it) against Python's, on every odd
    multiple of 2^-7 up to 256 (the only float32 ties at 6 decimals), the float32 just above each, and 20,000
    random float32 scores: where the two differ, the line is flagged; a float just above a tie prints as the
    tie does in Java and is flagged too, though Python agrees (why a flagged query is searched again)."""
    import numpy as np

    lucene.start_jvm()
    from jnius import autoclass

    java_string, java_float = autoclass("java.lang.String"), autoclass("java.lang.Float")
    rng = np.random.default_rng(0)
    ties = np.arange(1, 2 * 128 * 128, 2, dtype=np.float32) / np.float32(128)
    values = [float(v) for v in ties] + [float(v) for v in np.nextafter(ties, np.float32(np.inf))]
    values += [float(v) for v in rng.uniform(0, 60, 20_000).astype(np.float32)]
    differ = flagged_same = 0
    for v in values:
        java = java_string.format("%f", java_float(v))
        line = f"q Q0 d 1 {java} benchmark\n"
        if java != f"{v:.6f}":
            differ += 1
            assert lucene.half_up_tie(line), v
        elif lucene.half_up_tie(line):
            flagged_same += 1
    assert differ > 0 and flagged_same > 0


@pytest.mark.slow  # three BM25 pipelines through Lucene
def test_bm25_runs_are_the_same_bytes_copied_searched_again_or_in_memory(tmp_path, monkeypatch):
    """Cranfield as a local BEIR folder (numeric ids: many queries hit a document of their own id, removed
    here) through the search stage three ways: Anserini's lines copied where they can be; every query taken
    as printed from a tie, so each is searched again through ``batch_search``; and the in-memory path alone.
    One ``run.trec``, byte for byte."""
    import ir_datasets

    from helpers.beir import beir_folder
    from helpers.pipeline import run_cli

    ds = ir_datasets.load("cranfield")
    folder = beir_folder(
        tmp_path / "cran",
        corpus=[{"_id": d.doc_id, "title": d.title, "text": d.text} for d in ds.docs_iter()],
        queries=[{"_id": q.query_id, "text": q.text} for q in ds.queries_iter()],
        qrels="query-id\tcorpus-id\tscore\n"
        + "".join(f"{q.query_id}\t{q.doc_id}\t{q.relevance}\n" for q in ds.qrels_iter() if q.relevance > 0),
    )
    suite = tmp_path / "cran.toml"
    suite.write_text(
        f'name = "cran"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n'
        f'[bm25]\nk1 = 0.9\nb = 0.4\n[remove_query]\n"{folder}" = true\n'
    )
    runs, searched = {}, []
    in_memory = lucene.bm25_search

    def counted(index, queries, **kwargs):
        searched.append(len(queries))
        return in_memory(index, queries, **kwargs)

    for way in ("copied", "again", "memory"):
        with monkeypatch.context() as patch:
            patch.setattr(lucene, "bm25_search", counted)
            if way == "again":
                patch.setattr(lucene, "half_up_tie", lambda line: True)
            if way == "memory":
                patch.setattr(lucene, "bm25_run_writer_fits", lambda queries: False)
            args = ("--suite", str(suite), "--runs-dir", str(tmp_path / way), "--results-dir", str(tmp_path / "res"))
            assert run_cli(*args) == 0
        # the in-memory search: for every query where each line is taken as a tie, or the path is alone; else
        # only for a query with a line that may be a tie's: 32 fractions in 10^6, about 7 of Cranfield's
        # 225,000 lines if fractions are uniform (30 or more: Poisson tail below 1e-9)
        assert sum(searched) == 225 if way != "copied" else sum(searched) < 30, (way, searched)
        searched.clear()
        (run,) = (tmp_path / way / "search").glob("*/run.trec")
        runs[way] = run.read_bytes()
    assert runs["copied"] == runs["again"] == runs["memory"]
    lines = runs["copied"].decode().splitlines()
    assert len(lines) > 100_000 and not any(line.split()[0] == line.split()[2] for line in lines)  # self-hits gone


@pytest.mark.slow  # the untrained bert-tiny pipeline on a SciFact slice, then the engine's index and search twice
@pytest.mark.parametrize("spec", ["pisa:taat", "exhaustive"])
def test_an_exact_engines_run_is_lucenes_scores_and_the_same_bytes_from_lines_or_hits(
    untrained_splade, tmp_path, monkeypatch, spec
):
    """``--engines lucene,SPEC`` through the real index and search stages (two threads asked for): each
    of the 30 queries' top-1000 score lists in ``run.trec`` is Lucene's own; and in a copy of the runs without
    the engine's search stage, its hits formatted one by one (``run_lines`` off) give the same ``run.trec``, byte
    for byte, as do its lines all read back into hits (PISA's lines come a string a line, ``exhaustive``'s a
    string a query)."""
    import shutil

    from benchmark.retrieval import engines
    from helpers.pipeline import run_cli

    pytest.importorskip({"pisa:taat": "pyterrier_pisa", "exhaustive": "numba"}[spec])
    engine = type(engines.choose(spec).engine)

    def searches(folder: Path) -> dict[str, Path]:
        found = {}
        for stage in sorted((folder / "search").iterdir()):
            if not stage.name.startswith("."):
                config = json.loads((stage / "config.json").read_text())["config"]
                if config.get("k1") is None:  # impact searches only
                    found[config.get("engine", "lucene")] = stage
        return found

    def scores(run: Path) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for line in run.read_text().splitlines():
            qid, _, _, _, score, _ = line.split()
            out.setdefault(qid, []).append(float(score))
        return out

    runs = untrained_splade["runs"]
    args = ["--suite", str(untrained_splade["suite"]), "--threads", "2", "--results-dir", str(tmp_path / "res")]
    assert run_cli(*args, "--runs-dir", str(runs), "--engines", f"lucene,{spec}") == 0
    found = searches(runs)
    assert {"lucene", spec} <= set(found)  # the shared runs may hold the other engine's search too (a spec is
    # recorded as the engine's name alone at its default point: ``exhaustive`` for ``exhaustive:taat``)
    reference = scores(found["lucene"] / "run.trec")
    assert scores(found[spec] / "run.trec") == reference and len(reference) == 30
    # again in a copy of the runs: the hits formatted one by one (no run lines), then every query's lines read
    # back into hits (none copied as written), as the stage does for a score past 2**24 or a self-hit
    for way, patched in (("hits", (engine, "run_lines", lambda self, *a, **k: None)), ("read", None)):
        other = tmp_path / way
        shutil.copytree(runs, other)
        shutil.rmtree(other / "search" / found[spec].name)
        for stage in (other / "evaluate").iterdir():  # a finished evaluation would spare its search from running
            if found[spec].name in (stage / "config.json").read_text():
                shutil.rmtree(stage)
        with monkeypatch.context() as patch:
            if patched:
                patch.setattr(*patched)
            else:
                patch.setattr("benchmark.stages.search.copyable", lambda *a, **k: {})
            assert run_cli(*args, "--runs-dir", str(other), "--engines", spec) == 0
        again = searches(other)[spec]
        assert again.name == found[spec].name
        assert (again / "run.trec").read_bytes() == (found[spec] / "run.trec").read_bytes(), way
