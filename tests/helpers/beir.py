"""BEIR folders for tests: a hand-written three-document one, and slices of SciFact from the offline
ir_datasets cache (``write_scifact_slice``: the ``scifact_slice`` fixture in tests/conftest.py builds one per
session; ``scifact_folder``: the damage and trust tests)."""

from __future__ import annotations

import json
from pathlib import Path


def beir_folder(root, corpus=None, queries=None, qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n"):
    root.mkdir(parents=True, exist_ok=True)
    corpus = (
        corpus
        if corpus is not None
        else [
            {"_id": "d1", "title": "Sparse", "text": "retrieval with impacts"},
            {"_id": "d2", "title": "", "text": "no title here"},
            {"_id": "d3", "title": "Dense", "text": "vectors"},
        ]
    )
    queries = (
        queries
        if queries is not None
        else [{"_id": "q1", "text": "sparse?"}, {"_id": "q2", "text": "dense"}, {"_id": "q3", "text": "unjudged"}]
    )
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def write_scifact_slice(root, n_queries=20, n_docs=200):
    """The first ``n_queries`` judged SciFact test queries, every document they judge and the first
    other documents up to ``n_docs``, written as a BEIR folder (corpus order kept)."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/test")
    qrels = list(ds.qrels_iter())
    qids = sorted({q.query_id for q in qrels}, key=int)[:n_queries]
    judged = [q for q in qrels if q.query_id in qids]
    need = {q.doc_id for q in judged}
    docs, others = [], n_docs - len(need)
    for d in ds.docs_iter():
        if d.doc_id in need or others > 0:
            others -= d.doc_id not in need
            docs.append({"_id": d.doc_id, "title": d.title, "text": d.text})
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": queries[q]}) + "\n" for q in qids), encoding="utf-8"
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q.query_id}\t{q.doc_id}\t{q.relevance}\n" for q in judged),
        encoding="utf-8",
    )
    return root


def copy_of(folder, dest):
    import shutil

    return shutil.copytree(folder, dest)


def scifact_folder(root: Path, n_docs: int = 200, n_queries: int = 20) -> Path:
    """A BEIR folder: the first ``n_queries`` judged SciFact test queries, their judged documents, and
    other documents up to ``n_docs`` (deterministic)."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/test")
    qrels = [q for q in ds.qrels_iter()]
    qids = sorted({q.query_id for q in qrels}, key=int)[:n_queries]
    judged = {q.doc_id for q in qrels if q.query_id in qids}
    docs = [d for d in ds.docs_iter() if d.doc_id in judged]
    docs += [d for d in ds.docs_iter() if d.doc_id not in judged][: n_docs - len(docs)]
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for d in docs:
            fh.write(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n")
    texts = {q.query_id: q.text for q in ds.queries_iter()}
    with open(root / "queries.jsonl", "w") as fh:
        for q in qids:
            fh.write(json.dumps({"_id": q, "text": texts[q]}) + "\n")
    (root / "qrels").mkdir()
    with open(root / "qrels" / "test.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in qrels:
            if q.query_id in qids:
                fh.write(f"{q.query_id}\t{q.doc_id}\t{q.relevance}\n")
    return root
