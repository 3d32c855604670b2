"""A damaged or stale cache is never served: each damage is reported in one line and its stage redone,
and the metrics equal those of a fresh run."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

SUITE = """name = "damage"
description = "BM25 and untrained SPLADE on a local SciFact slice"
datasets = ["{folder}"]
measures = {measures}
[bm25]
[splade]
backbones = ["{model}"]
[encode]
max_doc_length = 64
max_query_length = 24
shard_size = 80
"""


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


@pytest.fixture(scope="module")
def world(tmp_path_factory, bert_tiny):
    base = tmp_path_factory.mktemp("damage")
    model = base / "models" / "tiny"
    shutil.copytree(bert_tiny, model)
    return {"base": base, "folder": scifact_folder(base / "slice"), "model": model}


def _run(world, capsys, runs: Path, measures=("nDCG@10",), results="results") -> tuple[dict, str]:
    suite = world["base"] / "damage.toml"
    suite.write_text(SUITE.format(folder=world["folder"], model=world["model"], measures=json.dumps(list(measures))))
    capsys.readouterr()
    assert run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(world["base"] / results)) == 0
    out = capsys.readouterr().out
    with open(world["base"] / results / "damage" / "metrics.csv") as fh:
        metrics = {(r["system"], r["measure"]): r["value"] for r in csv.DictReader(fh)}
    return metrics, out


def _stage(runs: Path, kind: str, **record) -> Path:
    found = []
    for folder in (runs / kind).iterdir():
        if folder.name.startswith("."):
            continue
        meta = json.loads((folder / "config.json").read_text())
        if all(meta["record"].get(k) == v for k, v in record.items()):
            found.append(folder)
    assert len(found) == 1, (kind, record, found)
    return found[0]


def _damaged(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("[damaged]")]


def _subset(metrics: dict, measures) -> dict:
    return {k: v for k, v in metrics.items() if k[1] in measures}


def test_each_damage_is_reported_and_redone(world, capsys):
    runs = world["base"] / "runs"
    every = ("nDCG@10", "RR@10", "R@100", "R@10")
    fresh, _ = _run(world, capsys, world["base"] / "fresh-runs", measures=every, results="fresh")
    first, _ = _run(world, capsys, runs)
    assert first == _subset(fresh, ("nDCG@10",))

    # 1. a truncated run file, then a newly added measure (a new evaluate stage reads the old run)
    run_file = _stage(runs, "search", type="bm25") / "run.trec"
    size = run_file.stat().st_size
    run_file.write_text(run_file.read_text()[: size // 3])
    metrics, out = _run(world, capsys, runs, measures=every[:2])
    assert _damaged(out) == [f"[damaged] {run_file.parent.name}: run.trec is {size // 3} bytes, recorded {size}; recomputing it"]
    assert metrics == _subset(fresh, every[:2])

    # 2. a truncated encode shard, then an index rebuild (index and search redone for a new measure)
    encode = _stage(runs, "encode")
    shard = encode / "docs" / "part-00001.jsonl"
    shard_size = shard.stat().st_size
    shard.write_text(shard.read_text()[:100])
    shutil.rmtree(_stage(runs, "index", type="impact"))
    shutil.rmtree(_stage(runs, "search", type="impact"))
    metrics, out = _run(world, capsys, runs, measures=every[:3])
    assert _damaged(out) == [f"[damaged] {encode.name}: docs/part-00001.jsonl is 100 bytes, recorded {shard_size}; recomputing it"]
    assert metrics == _subset(fresh, every[:3])

    # 3. a missing Lucene segment file under a finished index that a new search needs
    index = _stage(runs, "index", type="impact")
    segment = next(p for p in sorted((index / "index").iterdir()) if p.name.startswith("_"))
    segment.unlink()
    shutil.rmtree(_stage(runs, "search", type="impact"))
    metrics, out = _run(world, capsys, runs, measures=every)
    assert _damaged(out) == [f"[damaged] {index.name}: index/{segment.name} is missing; recomputing it"]
    assert metrics == fresh


def test_replaced_checkpoint_and_edited_qrels_make_new_stages(world, capsys):
    runs = world["base"] / "runs-inputs"
    before, _ = _run(world, capsys, runs)

    # 4. the checkpoint behind the same path is replaced: every stage from the backbone on is new
    from safetensors.torch import load_file, save_file

    weights = world["model"] / "model.safetensors"
    original = weights.read_bytes()
    tensors = load_file(weights)
    name = "bert.encoder.layer.1.output.LayerNorm.gamma"  # old-style names, as the checkpoint stores them
    tensors[name] = tensors[name] * 0.5
    save_file(tensors, weights, metadata={"format": "pt"})
    try:
        changed, out = _run(world, capsys, runs)
        assert "[run] backbone-" in out and "[cached] backbone-" not in out
        assert changed[("bm25", "nDCG@10")] == before[("bm25", "nDCG@10")]  # BM25 does not read the model
        assert changed[("splade", "nDCG@10")] != before[("splade", "nDCG@10")]
    finally:
        weights.write_bytes(original)

    # 5. qrels edited to the same size (one judgement 1 → 0), their old mtime put back: new topics stage
    qrels = world["folder"] / "qrels" / "test.tsv"
    text, stat = qrels.read_text(), qrels.stat()
    lines = text.splitlines()
    q, d, _ = lines[1].split("\t")
    edited = "\n".join([lines[0], f"{q}\t{d}\t0", *lines[2:]]) + "\n"
    assert len(edited) == len(text)
    qrels.write_text(edited)
    os.utime(qrels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    try:
        edited_metrics, out = _run(world, capsys, runs)
        assert "[run] topics-" in out
        fresh, _ = _run(world, capsys, world["base"] / "runs-fresh-qrels", results="fresh-qrels")
        assert edited_metrics == fresh and edited_metrics != before
    finally:
        qrels.write_text(text)


def test_keep_indexed_then_a_new_depth_searches_the_cached_index_without_encoding(tmp_path, capsys):
    """--keep indexed drops the encoded shards once the impact index exists; a new ranking depth k
    needs a new search stage, which reads the encode stage's record and df.npy (for FLOPS), not its
    shards: it must search the cached index, not encode the corpus again."""
    suite = tmp_path / "k.toml"
    body = ('name = "k"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
            'max_docs = 40\nmax_queries = 5\n{k}[splade]\nbackbones = ["bert-tiny"]\n'
            '[encode]\nmax_doc_length = 32\nmax_query_length = 16\n')
    argv = ["--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"),
            "--keep", "indexed"]
    suite.write_text(body.format(k=""))
    assert run_cli(*argv) == 0
    first = capsys.readouterr().out
    assert "--keep indexed: freed" in first and "[run] encode-" in first
    before = (tmp_path / "results" / "k" / "metrics.csv").read_text()
    suite.write_text(body.format(k="k = 100\n"))
    assert run_cli(*argv) == 0
    second = capsys.readouterr().out
    ran = [line.split()[1].split("-")[0] for line in second.splitlines() if line.startswith("[run] ")]
    assert ran == ["search", "evaluate"], second  # the index, the queries and the encode stage are cached
    scores = [[(r["measure"], r["value"], r["FLOPS"]) for r in csv.DictReader(f.read_text().splitlines())]
              for f in (tmp_path / "results" / "k" / "metrics.csv",)]
    assert scores == [[(r["measure"], r["value"], r["FLOPS"]) for r in csv.DictReader(before.splitlines())]]
