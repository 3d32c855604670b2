"""The files stages exchange (``benchmark.formats``): each writer's exact bytes on a hand-written
example, and each reader giving back the rows written. No JVM, no model."""

from __future__ import annotations

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.formats import documents as corpus, qrels, query_texts as topics, trec_run, vectors


def test_corpus_bytes_and_round_trip(tmp_path):
    docs = [corpus.Doc("d1", "Title Body"), corpus.Doc("d2", 'naïve “quotes” "and" \\ tab\t')]
    assert corpus.write_corpus(tmp_path, docs) == 2
    assert (tmp_path / "corpus" / "docs.jsonl").read_bytes() == (
        b'{"id": "d1", "contents": "Title Body"}\n'
        + '{"id": "d2", "contents": "naïve “quotes” \\"and\\" \\\\ tab\\t"}\n'.encode()
    )
    assert (tmp_path / "docids.txt").read_bytes() == b"d1\nd2\n"
    assert list(corpus.read_docs(corpus.docs_path(tmp_path))) == docs
    assert corpus.read_docids(corpus.docids_path(tmp_path)) == ["d1", "d2"]


def test_corpus_writer_leaves_nothing_when_its_rows_fail(tmp_path):
    def failing():
        yield corpus.Doc("d1", "text")
        raise BenchmarkError("empty corpus")

    with pytest.raises(BenchmarkError):
        corpus.write_corpus(tmp_path, failing())
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []


def test_topics_bytes_and_round_trip(tmp_path):
    rows = [topics.Query("q1", "what is sparse retrieval?"), topics.Query("q2", "")]
    assert topics.write_queries(tmp_path / topics.QUERIES, rows) == 2
    assert (tmp_path / "queries.tsv").read_bytes() == b"q1\twhat is sparse retrieval?\nq2\t\n"
    assert list(topics.read_queries(tmp_path / topics.QUERIES)) == rows


def test_qrels_bytes_and_round_trip(tmp_path):
    rows = [qrels.Qrel("q1", "d1", 1), qrels.Qrel("q1", "d2", 0), qrels.Qrel("q2", "d3", 2)]
    assert qrels.write_qrels(tmp_path / qrels.QRELS, rows) == 3
    assert (tmp_path / "qrels.txt").read_bytes() == b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"
    assert list(qrels.read_qrels(tmp_path / qrels.QRELS)) == rows


def test_trec_run_bytes_and_round_trip(tmp_path):
    hits = {"q1": [("d1", 12.0), ("d2", 3.1415926)], "q2": [], "q3": [("d9", -0.5)]}
    trec_run.write_run(tmp_path / trec_run.RUN, hits)
    assert (tmp_path / "run.trec").read_bytes() == (
        b"q1 Q0 d1 1 12.000000 benchmark\nq1 Q0 d2 2 3.141593 benchmark\nq3 Q0 d9 1 -0.500000 benchmark\n"
    )
    assert trec_run.read_run(tmp_path / trec_run.RUN) == {"q1": [("d1", 12.0), ("d2", 3.141593)], "q3": [("d9", -0.5)]}
    assert [row for _, row in trec_run.read_run_lines(tmp_path / trec_run.RUN)][1] == trec_run.RunLine(
        "q1", "Q0", "d2", "2", "3.141593", "benchmark"
    )
    assert trec_run.format_run({}) == ""


def test_trec_run_rows_keep_their_text_and_lines_are_checked(tmp_path):
    path = tmp_path / "other.trec"
    path.write_text("\nq1 Q0 d1 1 1.5e3 mine\n\nq1 Q0 d2 x nan mine\n")
    rows = list(trec_run.read_run_lines(path))
    assert [n for n, _ in rows] == [2, 4]
    assert trec_run.format_line(rows[0][1]._replace(tag="t")) == "q1 Q0 d1 1 1.5e3 t"
    assert trec_run.line_problem(rows[0][1]) is None
    assert trec_run.line_problem(rows[1][1]).startswith("rank 'x' is not an integer")
    assert trec_run.line_problem(rows[1][1]._replace(rank="2")).startswith("score 'nan' is not a finite number")
    path.write_text("q1 Q0 d1 1 1.0 t\nq1 d2 2 0.5\n")
    with pytest.raises(trec_run.RunLineError) as caught:
        list(trec_run.read_run_lines(path))
    assert (caught.value.number, caught.value.columns) == (2, 4)


def test_vectors_bytes_and_round_trip(tmp_path):
    docs = [vectors.Vector("d1", {"sparse": 120, "##ity": 7}), vectors.Vector("d2", {})]
    shard = vectors.shard_path(tmp_path, 3)
    assert shard.name == "part-00003.jsonl"
    assert vectors.write_doc_vectors(shard, docs) == 2
    assert shard.read_bytes() == (
        b'{"id": "d1", "contents": "", "vector": {"sparse": 120, "##ity": 7}}\n'
        b'{"id": "d2", "contents": "", "vector": {}}\n'
    )
    assert list(vectors.read_vectors(shard)) == docs
    queries = [vectors.Vector("q1", {"é": 3})]
    assert vectors.write_query_vectors(tmp_path / vectors.QUERIES, queries) == 1
    assert (tmp_path / "queries.jsonl").read_bytes() == '{"id": "q1", "vector": {"é": 3}}\n'.encode()
    assert list(vectors.read_vectors(tmp_path / vectors.QUERIES)) == queries


def test_formats_sit_below_every_stage_and_domain_module():
    """Only the standard library and the low modules: any stage or domain module may read any file."""
    import ast
    import importlib

    allowed = {"benchmark.common.atomic", "benchmark.common.errors"}
    for module in (corpus, qrels, topics, trec_run, vectors, importlib.import_module("benchmark.formats")):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in imported if m.startswith("benchmark")} <= allowed, module.__name__
