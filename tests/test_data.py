"""Datasets by ir_datasets id and as local BEIR folders; deterministic subsets that keep judged docs."""

from __future__ import annotations

import json

import pytest

from benchmark.data import materialise, read_docids, read_queries
from benchmark.errors import BenchmarkError


def beir_folder(root, corpus=None, queries=None, qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n"):
    root.mkdir(parents=True, exist_ok=True)
    corpus = corpus if corpus is not None else [
        {"_id": "d1", "title": "Sparse", "text": "retrieval with impacts"},
        {"_id": "d2", "title": "", "text": "no title here"},
        {"_id": "d3", "title": "Dense", "text": "vectors"},
    ]
    queries = queries if queries is not None else [{"_id": "q1", "text": "sparse?"}, {"_id": "q2", "text": "dense"},
                                                   {"_id": "q3", "text": "unjudged"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def test_local_beir_folder(tmp_path):
    folder = beir_folder(tmp_path / "mini")
    out = tmp_path / "out"
    out.mkdir()
    record = materialise(str(folder), out, progress=False)
    assert record == {"dataset": str(folder), "documents": 3, "queries": 2, "qrels": 2, "judged_docs_missing": 0}
    docs = [json.loads(line) for line in (out / "corpus" / "docs.jsonl").read_text().splitlines()]
    assert docs[0] == {"id": "d1", "contents": "Sparse retrieval with impacts"}  # title + " " + text
    assert read_queries(out) == {"q1": "sparse?", "q2": "dense"}
    assert (out / "qrels.txt").read_text() == "q1 0 d1 1\nq2 0 d3 2\n"


def test_scifact_subset_is_deterministic_and_keeps_judged_docs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    ra = materialise("beir/scifact/test", a, max_docs=200, max_queries=20, progress=False)
    materialise("beir/scifact/test", b, max_docs=200, max_queries=20, progress=False)
    assert ra["queries"] == 20 and ra["documents"] == 200
    assert read_docids(a) == read_docids(b) and read_queries(a) == read_queries(b)
    judged = {line.split()[2] for line in (a / "qrels.txt").read_text().splitlines()}
    assert judged <= set(read_docids(a))


def test_full_scifact_counts(tmp_path):
    record = materialise("beir/scifact/test", tmp_path, progress=False)
    assert (record["documents"], record["queries"], record["qrels"]) == (5183, 300, 339)


@pytest.mark.parametrize("kind,kwargs,pattern", [
    ("missing file", {}, "lacks queries.jsonl"),
    ("bad json", {"corpus_text": '{"_id": "d1", "text": "ok"}\n{not json}\n'}, r"corpus.jsonl:2 is not valid JSON"),
    ("no header", {"qrels": "q1\td1\t1\n"}, "not the BEIR header"),
    ("wrong columns", {"qrels": "query-id\tcorpus-id\tscore\nq1\td1\n"}, "must be query-id<TAB>corpus-id<TAB>integer score"),
    ("unknown query", {"qrels": "query-id\tcorpus-id\tscore\nq9\td1\t1\n"}, "query id.* not in queries.jsonl.*'q9'"),
    ("empty corpus", {"corpus": []}, "empty corpus"),
])
def test_malformed_beir_folder(tmp_path, kind, kwargs, pattern):
    corpus_text = kwargs.pop("corpus_text", None)
    folder = beir_folder(tmp_path / "bad", **kwargs)
    if corpus_text is not None:
        (folder / "corpus.jsonl").write_text(corpus_text)
    if kind == "missing file":
        (folder / "queries.jsonl").unlink()
    with pytest.raises(BenchmarkError, match=pattern):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        materialise(str(folder), out, progress=False)
