"""The triples stage: (query, positive, negative[, score]) examples for training, by the recipe's ``negatives``.

- ``bm25``: hard negatives mined from the harness's own BM25 run on the training topics;
- ``official-triples``: an ir_datasets docpairs collection (MS MARCO ``train/triples-small``);
- ``dataset-hard-negatives``: a Hugging Face dataset with query/positive/negative[/score] columns
  (e.g. ``sentence-transformers/msmarco:bert-ensemble-margin-mse``, for MarginMSE).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from benchmark.atomic import write_jsonl
from benchmark.data import iter_docs, qrels_path, read_queries
from benchmark.errors import BenchmarkError
from benchmark.stages.search import Search

TRIPLES = "triples.jsonl"


def _write(out: Path, triples: Iterator[dict[str, Any]]) -> int:
    n = write_jsonl(out / TRIPLES, triples)
    if n == 0:
        (out / TRIPLES).unlink()
        raise BenchmarkError(f"no training triples could be made in {out}; the training data needs queries with relevant documents")
    return n


def mine_bm25(parents: dict[str, Path], out: Path, *, depth: int = 50, seed: int = 42, limit: int = 0, **_: Any) -> dict[str, Any]:
    """One triple per (query, relevant doc); the negative is drawn from BM25's top ``depth`` non-relevant hits."""
    queries = read_queries(parents["topics"])
    positives: dict[str, list[str]] = {}
    with open(qrels_path(parents["topics"]), encoding="utf-8") as fh:
        for line in fh:
            qid, _, docid, rel = line.split()
            if int(rel) > 0:
                positives.setdefault(qid, []).append(docid)
    run = Search.hits(parents["run"])
    texts = dict(iter_docs(parents["corpus"]))

    def triples() -> Iterator[dict[str, str]]:
        for qid in sorted(positives):
            pos = set(positives[qid])
            pool = [d for d, _ in run.get(qid, [])[:depth] if d not in pos]
            if not pool:
                continue
            rng = random.Random(int(hashlib.sha1(f"{seed}:{qid}".encode()).hexdigest()[:8], 16))
            for docid in positives[qid]:
                yield {"query": queries[qid], "positive": texts[docid], "negative": texts[rng.choice(pool)]}

    n = _write(out, islice(triples(), limit or None))
    return {"negatives": "bm25", "triples": n, "depth": depth, "seed": seed}


def official_triples(parents: dict[str, Path], out: Path, *, dataset: str, limit: int = 0, **_: Any) -> dict[str, Any]:
    """The collection's own (query, positive, negative) id triples, resolved to text, in file order."""
    import ir_datasets

    ds = ir_datasets.load(dataset)
    if not ds.has_docpairs():
        raise BenchmarkError(f"dataset {dataset!r} has no docpairs (training triples); use e.g. msmarco-passage/train/triples-small")
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    docs = ds.docs_store()

    def triples() -> Iterator[dict[str, str]]:
        for pair in ds.docpairs_iter():
            yield {"query": queries[pair.query_id], "positive": docs.get(pair.doc_id_a).text,
                   "negative": docs.get(pair.doc_id_b).text}

    n = _write(out, islice(triples(), limit or None))
    return {"negatives": "official-triples", "triples": n, "dataset": dataset}


def hf_triples(parents: dict[str, Path], out: Path, *, dataset: str, limit: int = 0, **_: Any) -> dict[str, Any]:
    """A Hugging Face dataset ``hub_id[:subset]`` with query/positive/negative(/score) columns."""
    from datasets import load_dataset

    hub, _, subset = dataset.partition(":")
    rows = load_dataset(hub, subset or None, split="train", streaming=True)
    keep = ("query", "positive", "negative", "score")
    n = _write(out, islice(({k: r[k] for k in keep if k in r} for r in rows), limit or None))
    return {"negatives": "dataset-hard-negatives", "triples": n, "dataset": dataset}


NEGATIVES_TO_MINER: dict[str, Callable[..., dict[str, Any]]] = {
    "bm25": mine_bm25,
    "official-triples": official_triples,
    "dataset-hard-negatives": hf_triples,
}


def read_triples(stage_dir: Path) -> list[dict[str, Any]]:
    with open(Path(stage_dir) / TRIPLES, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]
