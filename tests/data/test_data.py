"""Datasets by ir_datasets id and as local BEIR folders; deterministic subsets that keep judged docs."""

from __future__ import annotations

import json

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.data.datasets import materialise, validate_dataset
from benchmark.formats import documents as corpus_format, query_texts as topics_format
from helpers import ROOT
from helpers.beir import beir_folder, copy_of


def read_queries(folder):
    return dict(topics_format.read_queries(folder / topics_format.QUERIES))


def read_docids(folder):
    return corpus_format.read_docids(corpus_format.docids_path(folder))


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


READ_CORPUS = """
import ir_datasets
from benchmark.data import dataset_cache
print(sum(1 for _ in dataset_cache.docs_iter(ir_datasets.load("beir/scifact/test"))))
"""


def test_a_fresh_ir_datasets_cache_is_filled_under_the_lock(tmp_path, monkeypatch):
    """ir_datasets fills SciFact's document store on first use and calls it built after one document, so a
    second process could read a corpus cut short: the harness (``benchmark.data.datasets``, ``negatives``, ``samples``)
    starts every corpus read under the cache's lock. While another holds it, a reader on a fresh cache
    waits and writes no store; released, it reads all 5183 documents."""
    import os
    import shutil
    import subprocess
    import sys
    import time
    from pathlib import Path

    from benchmark.data.dataset_cache import cache_lock

    source = Path(os.environ["IR_DATASETS_HOME"]) / "beir" / "scifact" / "source.zip"
    if not source.is_file():
        pytest.skip("no beir/scifact in this ir_datasets cache")
    home = tmp_path / "irds"
    (home / "beir" / "scifact").mkdir(parents=True)
    shutil.copy(source, home / "beir" / "scifact" / "source.zip")
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    monkeypatch.setenv("IR_DATASETS_HOME", str(home))
    with cache_lock():
        reader = subprocess.Popen([sys.executable, "-c", READ_CORPUS], env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        assert reader.poll() is None and not (home / "beir" / "scifact" / "docs.pklz4").exists()
    out, _ = reader.communicate(timeout=300)
    assert reader.returncode == 0 and out.split() == ["5183"]


@pytest.mark.parametrize(
    "kind,kwargs,pattern",
    [
        ("missing file", {}, "lacks queries.jsonl"),
        ("bad json", {"corpus_text": '{"_id": "d1", "text": "ok"}\n{not json}\n'}, r"corpus.jsonl:2 is not valid JSON"),
        ("no header", {"qrels": "q1\td1\t1\n"}, "not the BEIR header"),
        (
            "wrong columns",
            {"qrels": "query-id\tcorpus-id\tscore\nq1\td1\n"},
            "must be query-id<TAB>corpus-id<TAB>integer score",
        ),
        (
            "unknown query",
            {"qrels": "query-id\tcorpus-id\tscore\nq9\td1\t1\n"},
            "query id.* not in queries.jsonl.*'q9'",
        ),
        ("empty corpus", {"corpus": []}, "empty corpus"),
    ],
)
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


# --------------------------------------------------------------------------- a SciFact slice as a local folder


def test_slice_reads_as_beir_reads_it(scifact_slice):
    """Our strict reader gives BEIR's reference loader's documents (title + " " + text) in its order."""
    from beir.datasets.data_loader import GenericDataLoader

    from benchmark.data.sources.beir_folder import read_local_corpus

    reference = GenericDataLoader(data_folder=str(scifact_slice)).load_corpus()
    ours = list(read_local_corpus(scifact_slice))
    assert len(ours) == 200
    assert ours == [(i, f"{d.get('title') or ''} {d.get('text') or ''}") for i, d in reference.items()]


def test_bom_blank_lines_and_crlf_read_like_the_clean_folder(tmp_path, scifact_slice):
    """A BOM (corpus, queries, qrels header), blank lines and CRLF line ends change nothing."""
    messy = copy_of(scifact_slice, tmp_path / "messy")
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        lines = (messy / rel).read_text(encoding="utf-8").splitlines()
        if rel == "corpus.jsonl":
            lines = [lines[0], "", *lines[1:5], "   ", *lines[5:], ""]
        (messy / rel).write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    outs = []
    for name, folder in (("clean", scifact_slice), ("messy", messy)):
        out = tmp_path / f"out-{name}"
        out.mkdir()
        assert validate_dataset(str(folder)) is None
        materialise(str(folder), out, progress=False)
        outs.append([(out / f).read_bytes() for f in ("corpus/docs.jsonl", "docids.txt", "queries.tsv", "qrels.txt")])
    assert outs[0] == outs[1]


def test_content_aware_keys(tmp_path, scifact_slice):
    """An edit that keeps the size and restores the mtime still changes the stage keys."""
    import os

    from benchmark.data.datasets import corpus_fingerprint
    from benchmark.data.sources import parse

    folder = copy_of(scifact_slice, tmp_path / "edited")
    ref = parse(str(folder))
    key, corpus_key = ref.key(), corpus_fingerprint(str(folder))
    assert key.startswith(f"local:{folder}@test:")
    for rel in ("qrels/test.tsv", "corpus.jsonl"):
        path = folder / rel
        st = path.stat()
        text = path.read_text(encoding="utf-8")
        i = text.rindex("\t1\n") if rel.endswith(".tsv") else text.index('"text": "') + 9
        edited = (
            text[:i]
            + ("\t2\n" if rel.endswith(".tsv") else text[i : i + 1].swapcase())
            + text[i + (3 if rel.endswith(".tsv") else 1) :]
        )
        assert len(edited) == len(text) and edited != text
        path.write_text(edited, encoding="utf-8")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
        assert ref.key() != key
        key = ref.key()
    assert corpus_fingerprint(str(folder)) != corpus_key  # only the corpus edit re-keys the corpus stage


def test_an_id_never_reads_the_working_folder(tmp_path, monkeypatch, scifact_slice):
    """A folder beir/scifact/test/ (and beir/scifact/) under the working folder does not replace the
    ir_datasets dataset of the same name: a local folder must be written as a path."""
    from benchmark.data.datasets import corpus_source, load_source
    from benchmark.data.sources import parse

    copy_of(scifact_slice, tmp_path / "beir" / "scifact" / "test")
    for f in ("corpus.jsonl", "queries.jsonl"):
        (tmp_path / "beir" / "scifact" / f).write_bytes((scifact_slice / f).read_bytes())
    monkeypatch.chdir(tmp_path)
    ref = parse("beir/scifact/test")
    assert ref.form == "ir_datasets" and ref.key() == "beir/scifact/test"
    assert corpus_source("beir/scifact/test") == "beir/scifact"
    _, queries, _ = load_source("beir/scifact/test", docs=False)
    assert len(queries) == 300  # ir_datasets' SciFact test queries, not the slice's 20
    assert validate_dataset("./beir/scifact/test") is None  # written as a path, the folder is used
    folder = parse("./beir/scifact/test")
    assert (folder.form, folder.location, folder.split) == (
        "beir-folder",
        str((tmp_path / "beir" / "scifact" / "test").resolve()),
        "test",
    )


def test_at_sign_in_folder_names(tmp_path, monkeypatch, scifact_slice):
    """``@split`` splits at the last '@', and only when that split exists, so 'my@data' is a folder."""
    from benchmark.data.sources import parse

    monkeypatch.chdir(tmp_path)
    folder = copy_of(scifact_slice, tmp_path / "my@data").resolve()
    (folder / "qrels" / "dev.tsv").write_bytes((folder / "qrels" / "test.tsv").read_bytes())
    assert (parse("./my@data").location, parse("./my@data").split) == (str(folder), "test")
    assert (parse("./my@data@test").location, parse("./my@data@test").split) == (str(folder), "test")
    assert (parse("./my@data@dev").location, parse("./my@data@dev").split) == (str(folder), "dev")
    assert validate_dataset("./my@data") is None and validate_dataset("./my@data@dev") is None
    assert "has no split 'train' (no qrels/train.tsv); valid splits: dev, test" in validate_dataset("./my@data@train")
    copy_of(scifact_slice, tmp_path / "my")  # ./my@test is now also split 'test' of ./my: ambiguous only if both exist
    (tmp_path / "my" / "qrels" / "data.tsv").write_bytes((folder / "qrels" / "test.tsv").read_bytes())
    assert "is ambiguous" in validate_dataset("./my@data")


def cranfield_folder(root):
    """Cranfield written out as a BEIR folder nobody here built: numeric ids (queries 1..225, documents
    1..1400), so query ids coincide with unrelated documents' ids. Positive judgements only."""
    import ir_datasets

    ds = ir_datasets.load("cranfield")
    return beir_folder(
        root,
        corpus=[{"_id": d.doc_id, "title": d.title, "text": d.text} for d in ds.docs_iter()],
        queries=[{"_id": q.query_id, "text": q.text} for q in ds.queries_iter()],
        qrels="query-id\tcorpus-id\tscore\n"
        + "".join(f"{q.query_id}\t{q.doc_id}\t{q.relevance}\n" for q in ds.qrels_iter() if q.relevance > 0),
    )


@pytest.mark.slow  # two BM25 pipelines through Lucene, and Pyserini's own searcher (importing it: ~10 s)
def test_numeric_ids_keep_their_coincidental_hits(tmp_path):
    """A local folder keeps a hit whose id equals the query id (removal is for the BEIR ids 2CR runs
    with --remove-query, or when the suite asks): the harness equals BM25 straight through Pyserini's
    LuceneSearcher and ir_measures; asked to remove them, the tables say so."""
    import csv

    import ir_measures

    from benchmark.retrieval.lucene import start_jvm
    from helpers.pipeline import run_cli

    start_jvm()  # a JDK >= 21 for pyserini (what the harness finds too)
    from pyserini.search.lucene import LuceneSearcher

    folder = cranfield_folder(tmp_path / "cran")
    measures = ["nDCG@10", "AP", "R@1000"]
    runs = tmp_path / "runs"
    got = {}
    for name, extra in (("kept", ""), ("removed", f'[remove_query]\n"{folder}" = true\n')):
        suite = tmp_path / f"{name}.toml"
        suite.write_text(
            f'name = "{name}"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = {json.dumps(measures)}\n'
            f"[bm25]\nk1 = 0.9\nb = 0.4\n{extra}"
        )
        assert run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "res")) == 0
        with open(tmp_path / "res" / name / "metrics.csv") as fh:
            got[name] = {r["measure"]: float(r["value"]) for r in csv.DictReader(fh)}
    index = next(p for p in (runs / "index").iterdir() if not p.name.startswith(".")) / "index"
    searcher = LuceneSearcher(str(index))
    searcher.set_bm25(0.9, 0.4)
    queries = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (folder / "queries.jsonl").read_text().splitlines()
    }
    hits = searcher.batch_search(list(queries.values()), list(queries), k=1000, threads=1)
    run = [ir_measures.ScoredDoc(q, h.docid, h.score) for q, hs in hits.items() for h in hs]
    assert sum(1 for d in run if d.query_id == d.doc_id) > 100  # coincidences that removal would drop
    qrels = [
        ir_measures.Qrel(*line.split("\t")[:2], int(line.split("\t")[2]))
        for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]
    ]
    direct = {
        str(m): v
        for m, v in ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in measures], qrels, run).items()
    }
    # judged queries without any hit count 0 in both (trec_eval -c); runs written at 6 decimals: 4-decimal agreement
    assert {m: round(v, 4) for m, v in got["kept"].items()} == {m: round(v, 4) for m, v in direct.items()}
    assert got["removed"] != got["kept"]
    kept, removed = ((tmp_path / "res" / n / "table.md").read_text() for n in ("kept", "removed"))
    assert (
        "Self-hits removed" not in kept
        and "Self-hits removed" in removed
        and "cran" in removed.split("Self-hits removed")[1]
    )


def test_folders_of_one_name_in_two_places_stay_apart(tmp_path):
    """/a/slice and /b/slice (other judgements) are two datasets: two columns, each its own score,
    told apart by their content digest."""
    import csv

    from benchmark.data.sources import parse
    from helpers.pipeline import run_cli

    a = beir_folder(tmp_path / "a" / "slice", qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    b = beir_folder(tmp_path / "b" / "slice", qrels="query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    suite = tmp_path / "two.toml"
    suite.write_text(f'name = "two"\ndescription = "d"\ndatasets = ["{a}", "{b}"]\nmeasures = ["RR@10"]\n[bm25]\n')
    assert (
        run_cli("--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"))
        == 0
    )
    with open(tmp_path / "res" / "two" / "metrics.csv") as fh:
        got = {r["dataset"]: float(r["value"]) for r in csv.DictReader(fh)}
    label = {f: "local:slice~" + parse(str(f)).key().rsplit(":", 1)[-1][:8] for f in (a, b)}
    # 'sparse?' matches d1 only: RR@10 is 1 where d1 is judged, 0 where d2 is (never retrieved)
    assert got == {label[a]: 1.0, label[b]: 0.0}
    table = (tmp_path / "res" / "two" / "table.md").read_text()
    assert f"| slice~{label[a][-8:]} | slice~{label[b][-8:]} |" in table
