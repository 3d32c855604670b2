"""The encode stage: a SPLADE model turns the corpus and the queries into integer impact vectors.

Documents go to ``docs/part-NNNNN.jsonl`` (Pyserini JsonVectorCollection shards), queries to
``queries.jsonl``; both as ``{token: int}`` after quantisation (see ``benchmark.splade.quantise``:
Anserini truncates float impacts, so we round ourselves). Each shard is renamed into place only when
whole, so a killed encode resumes at the first missing shard.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmark import faults
from benchmark.data import iter_docs, read_queries

SHARD = "part-{:05d}.jsonl"


def vocabulary_terms(tokenizer: Any, vocab_size: int) -> list[str]:
    """Index terms for each vocabulary id: the token itself when it is a safe, unique Lucene term."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    terms, seen = [], set()
    for i in range(vocab_size):
        tok = tokens[i] if i < len(tokens) else None
        if not tok or any(c.isspace() for c in tok) or tok in seen:
            tok = f"[id{i}]"  # whitespace would split a pretokenized term; ids past the tokenizer have no token
        seen.add(tok)
        terms.append(tok)
    return terms


def to_vector(ids: np.ndarray, weights: np.ndarray, terms: list[str], scale: int) -> dict[str, int]:
    from benchmark.splade import quantise

    q = quantise(weights, scale)
    keep = q > 0
    return {terms[i]: int(w) for i, w in zip(ids[keep].tolist(), q[keep].tolist())}


def _chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_jsonl(path: Path, rows: Iterator[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def load_model(model_dir: Path, precision: str = "float32") -> tuple[Any, Any]:
    """Load a saved ``*ForMaskedLM`` for inference, on the GPU when there is one."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[precision]
    model = AutoModelForMaskedLM.from_pretrained(model_dir, dtype=dtype)
    model.eval()
    if torch.cuda.is_available():
        model.to("cuda")
    return model, AutoTokenizer.from_pretrained(model_dir)


def encode_stage(model_dir: Path, data_dir: Path, out: Path, *, max_doc_length: int, max_query_length: int,
                 batch_size: int, shard_size: int, scale: int, precision: str = "float32",
                 progress: bool = True) -> dict[str, Any]:
    from benchmark.splade import encode, quantise

    model, tokenizer = load_model(model_dir, precision)
    vocab = int(model.config.vocab_size)
    terms = vocabulary_terms(tokenizer, vocab)
    docs_dir = out / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)

    for n, chunk in enumerate(_chunks(iter_docs(data_dir), shard_size)):
        shard = docs_dir / SHARD.format(n)
        stats = docs_dir / f"part-{n:05d}.df.npy"
        if shard.exists() and stats.exists():
            continue  # finished before a kill; shards only appear whole
        reps = encode(model, tokenizer, [text for _, text in chunk], max_length=max_doc_length,
                      batch_size=batch_size, progress=f"encode docs {n}" if progress else None)
        vectors = [to_vector(ids, w, terms, scale) for ids, w in reps]
        df = np.zeros(vocab, dtype=np.int64)
        for ids, w in reps:
            df[ids[quantise(w, scale) > 0]] += 1
        np.save(stats.with_name(f".{stats.name}"), df)
        os.replace(stats.with_name(f".{stats.name}"), stats)
        _write_jsonl(shard, ({"id": doc_id, "contents": "", "vector": v} for (doc_id, _), v in zip(chunk, vectors)))
        faults.point("encode:shard")

    queries = read_queries(data_dir)
    qids = list(queries)
    reps = encode(model, tokenizer, [queries[q] for q in qids], max_length=max_query_length,
                  batch_size=batch_size, progress="encode queries" if progress else None)
    qvecs = {qid: to_vector(ids, w, terms, scale) for qid, (ids, w) in zip(qids, reps)}
    faults.point("encode:queries")
    _write_jsonl(out / "queries.jsonl", ({"id": q, "vector": v} for q, v in qvecs.items()))
    return {**summarise(docs_dir, qvecs, terms), "vocab_size": vocab, "scale": scale,
            "max_doc_length": max_doc_length, "max_query_length": max_query_length, "precision": precision}


def summarise(docs_dir: Path, queries: dict[str, dict[str, int]], terms: list[str]) -> dict[str, Any]:
    """Sparsity in the papers' terms: mean non-zeros per doc and query, and FLOPS.

    FLOPS = Σ_j p_q(j)·p_d(j), with p the fraction of queries (documents) where term j is non-zero:
    the expected number of multiplications of one query–document dot product.
    """
    df = sum(np.load(p) for p in sorted(docs_dir.glob("part-*.df.npy")))
    n_docs = sum(1 for p in docs_dir.glob("part-*.jsonl") for _ in open(p, encoding="utf-8"))
    index = {t: i for i, t in enumerate(terms)}
    qf = np.zeros(len(terms), dtype=np.int64)
    for v in queries.values():
        qf[[index[t] for t in v]] += 1
    n_q = max(len(queries), 1)
    flops = float(np.dot(qf / n_q, df / max(n_docs, 1)))
    return {
        "documents": n_docs,
        "queries": len(queries),
        "doc_nnz": float(df.sum() / max(n_docs, 1)),
        "query_nnz": float(qf.sum() / n_q),
        "FLOPS": flops,
        "empty_queries": sum(1 for v in queries.values() if not v),
    }


def read_query_vectors(encode_dir: Path) -> dict[str, dict[str, int]]:
    out = {}
    with open(Path(encode_dir) / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[row["id"]] = row["vector"]
    return out

