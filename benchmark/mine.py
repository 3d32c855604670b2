"""The mine stage: training triples (query, positive, hard negative) from the harness's own BM25 run."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from benchmark.data import iter_docs, qrels_path, read_queries
from benchmark.errors import BenchmarkError
from benchmark.search import read_run

TRIPLES = "triples.jsonl"


def mine_stage(data_dir: Path, run_file: Path, out: Path, *, depth: int = 50, seed: int = 42) -> dict[str, Any]:
    """One triple per (query, relevant doc); the negative is drawn from BM25's top ``depth`` non-relevant hits."""
    queries = read_queries(data_dir)
    positives: dict[str, list[str]] = {}
    with open(qrels_path(data_dir), encoding="utf-8") as fh:
        for line in fh:
            qid, _, docid, rel = line.split()
            if int(rel) > 0:
                positives.setdefault(qid, []).append(docid)
    run = read_run(run_file)
    texts = dict(iter_docs(data_dir))
    triples = []
    for qid in sorted(positives):
        pos = set(positives[qid])
        pool = [d for d, _ in run.get(qid, [])[:depth] if d not in pos]
        if not pool:
            continue
        rng = random.Random(int(hashlib.sha1(f"{seed}:{qid}".encode()).hexdigest()[:8], 16))
        for docid in positives[qid]:
            triples.append({"query": queries[qid], "positive": texts[docid], "negative": texts[rng.choice(pool)]})
    if not triples:
        raise BenchmarkError(f"no training triples could be mined from {data_dir}; the training split needs queries with relevant documents")
    tmp = out / f".{TRIPLES}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for t in triples:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    os.replace(tmp, out / TRIPLES)
    return {"triples": len(triples), "queries": len({t["query"] for t in triples}), "depth": depth, "seed": seed}


def read_triples(mine_dir: Path) -> list[dict[str, str]]:
    with open(Path(mine_dir) / TRIPLES, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]
