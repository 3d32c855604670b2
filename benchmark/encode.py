"""The encode stages: a SPLADE model turns a corpus and a query set into integer impact vectors.

Documents (stage ``encode``) go to ``docs/part-NNNNN.jsonl`` (Pyserini JsonVectorCollection shards),
queries (stage ``queries``) to ``queries.jsonl``; both as ``{token: int}`` after quantisation (see ``benchmark.splade.quantise``:
Anserini truncates float impacts, so we round ourselves). Each shard is renamed into place only when
whole, so a killed encode resumes at the first missing shard.

Serialising a shard (quantise, term strings, JSON) costs ~70 µs per document of pure Python: 10 minutes
for MS MARCO's 8.8M passages, as long as a GPU needs to encode them. So every shard but the last is
written by a pool of writer processes while the model encodes the next one (processes, not threads:
a thread would hold the GIL that the encode loop needs to launch kernels). Tokenisation (~30 µs per
passage) runs one shard ahead in a thread: the fast tokenizer releases the GIL.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmark import faults
from benchmark.atomic import write_jsonl
from benchmark.data import iter_docs, read_queries

SHARD = "part-{:05d}.jsonl"
QUERIES = "queries.jsonl"
#: Writer processes for document shards (at most; one core is left to the encode loop).
MAX_WRITERS = 4


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


def to_vector(ids: np.ndarray, weights: np.ndarray, terms: list[str], scale: int) -> tuple[np.ndarray, dict[str, int]]:
    """Quantised ``{term: impact}`` of one SPLADE vector, and the vocabulary ids it kept (for df/qf counts)."""
    from benchmark.splade import quantise_vector

    kept, impacts = quantise_vector(ids, weights, scale)
    return kept, {terms[i]: int(w) for i, w in zip(kept.tolist(), impacts.tolist())}


def _chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _with_next(items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """Each item with the one after it (None after the last)."""
    it = iter(items)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, item
        prev = item
    yield prev, None


_WRITER_TERMS: list[str] = []


def _writer_init(terms: list[str]) -> None:
    """Writer process: keep the vocabulary; exit if the encoding process dies (killed runs leave no orphans)."""
    global _WRITER_TERMS
    _WRITER_TERMS = terms
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def write_shard(shard: Path, doc_ids: list[str], reps: list[tuple[np.ndarray, np.ndarray]], scale: int,
                terms: list[str] | None = None) -> np.ndarray:
    """One JsonVectorCollection shard, then its per-term document frequencies (``.df.npy``), each atomic.

    A shard is finished when both files exist; a kill between the two redoes the shard.
    """
    terms = _WRITER_TERMS if terms is None else terms
    df = np.zeros(len(terms), dtype=np.int64)

    def rows() -> Iterator[dict[str, Any]]:
        for doc_id, (ids, w) in zip(doc_ids, reps):
            kept, vector = to_vector(ids, w, terms, scale)
            df[kept] += 1
            yield {"id": doc_id, "contents": "", "vector": vector}

    write_jsonl(shard, rows())
    stats = _stats_path(shard)
    np.save(stats.with_name(f".{stats.name}"), df)
    os.replace(stats.with_name(f".{stats.name}"), stats)
    return df


def _stats_path(shard: Path) -> Path:
    return shard.with_name(shard.name.replace(".jsonl", ".df.npy"))


def _writer_pool(terms: list[str], workers: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_writer_init, initargs=(terms,))


def load_model(model_dir: Path, attn_implementation: str = "sdpa") -> tuple[Any, Any]:
    """Load a saved ``*ForMaskedLM`` for inference (float32 weights; bf16 is autocast in ``encode``),
    on the GPU when there is one.

    The attention implementation is pinned (transformers' default has changed between versions, and
    ``encode`` captures the decoder's input in the padded [batch, length, hidden] layout); the
    loaded one is ``model.config._attn_implementation``.
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn_implementation)
    model.eval()
    if torch.cuda.is_available():
        model.to("cuda")
    return model, AutoTokenizer.from_pretrained(model_dir)


def encode_docs_stage(model_dir: Path, corpus_dir: Path, out: Path, *, max_length: int, batch_size: int,
                      shard_size: int, scale: int, precision: str = "float32", progress: bool = True) -> dict[str, Any]:
    """Documents → JsonVectorCollection shards, plus ``df.npy`` (per-term document frequency, for FLOPS)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from benchmark.splade import encode, tokenize

    model, tokenizer = load_model(model_dir)
    vocab = int(model.config.vocab_size)
    terms = vocabulary_terms(tokenizer, vocab)
    docs_dir = out / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    df, n_docs = np.zeros(vocab, dtype=np.int64), 0
    pool, pending = None, deque()
    writers = max(1, min(MAX_WRITERS, (os.cpu_count() or 2) - 1))

    def finished(shard_df: np.ndarray) -> None:
        nonlocal df
        df += shard_df
        faults.point("encode:shard")

    def done(n: int) -> bool:
        shard = docs_dir / SHARD.format(n)
        return shard.exists() and _stats_path(shard).exists()

    def texts(chunk: list[tuple[str, str]]) -> list[str]:
        return [text for _, text in chunk]

    ahead = ThreadPoolExecutor(1, thread_name_prefix="tokenize")  # the only user of the tokenizer
    tokens: dict[int, Future] = {}
    try:
        for n, (chunk, following) in enumerate(_with_next(_chunks(iter_docs(corpus_dir), shard_size))):
            shard = docs_dir / SHARD.format(n)
            n_docs += len(chunk)
            if done(n):
                df += np.load(_stats_path(shard))
                continue  # finished before a kill; shards only appear whole
            if n not in tokens:
                tokens[n] = ahead.submit(tokenize, tokenizer, texts(chunk), max_length)
            if following is not None and not done(n + 1):
                tokens[n + 1] = ahead.submit(tokenize, tokenizer, texts(following), max_length)
            reps = encode(model, tokenizer, tokens.pop(n).result(), max_length=max_length,
                          batch_size=batch_size, progress=f"encode docs {n}" if progress else None,
                          precision=precision)
            doc_ids = [doc_id for doc_id, _ in chunk]
            if following is None:  # nothing left to overlap with
                finished(write_shard(shard, doc_ids, reps, scale, terms))
                continue
            pool = pool or _writer_pool(terms, writers)
            pending.append(pool.submit(write_shard, shard, doc_ids, reps, scale))
            while len(pending) > writers:  # bounded: encoded shards wait in memory
                finished(pending.popleft().result())
        while pending:
            finished(pending.popleft().result())
    finally:
        ahead.shutdown(cancel_futures=True)
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    np.save(out / "df.npy", df)
    return {"documents": n_docs, "doc_nnz": float(df.sum() / max(n_docs, 1)), "vocab_size": vocab,
            "scale": scale, "max_length": max_length, "precision": precision}


def encode_queries_stage(model_dir: Path, topics_dir: Path, out: Path, *, max_length: int, batch_size: int,
                         scale: int, precision: str = "float32", progress: bool = True) -> dict[str, Any]:
    """Queries → ``queries.jsonl`` of ``{token: int}``, plus ``qf.npy`` (per-term query frequency)."""
    from benchmark.splade import encode

    model, tokenizer = load_model(model_dir)
    vocab = int(model.config.vocab_size)
    terms = vocabulary_terms(tokenizer, vocab)
    queries = read_queries(topics_dir)
    qids = list(queries)
    reps = encode(model, tokenizer, [queries[q] for q in qids], max_length=max_length, batch_size=batch_size,
                  progress="encode queries" if progress else None, precision=precision)
    qf = np.zeros(vocab, dtype=np.int64)
    qvecs: dict[str, dict[str, int]] = {}
    for qid, (ids, w) in zip(qids, reps):
        kept, qvecs[qid] = to_vector(ids, w, terms, scale)
        qf[kept] += 1
    faults.point("encode:queries")
    np.save(out / "qf.npy", qf)
    write_jsonl(out / QUERIES, ({"id": q, "vector": v} for q, v in qvecs.items()))
    return {"queries": len(qvecs), "query_nnz": float(qf.sum() / max(len(qvecs), 1)),
            "empty_queries": sum(1 for v in qvecs.values() if not v), "vocab_size": vocab,
            "scale": scale, "max_length": max_length, "precision": precision}


def sparsity(encode_dir: Path, queries_dir: Path) -> dict[str, float]:
    """Sparsity in the papers' terms: mean non-zeros per document and query, and FLOPS.

    FLOPS = Σ_j p_q(j)·p_d(j), with p the fraction of queries (documents) where term j is non-zero:
    the expected number of multiplications of one query–document dot product.
    """
    from benchmark.stage import read_meta

    docs, queries = read_meta(encode_dir)["record"], read_meta(queries_dir)["record"]
    p_d = np.load(Path(encode_dir) / "df.npy") / max(docs["documents"], 1)
    p_q = np.load(Path(queries_dir) / "qf.npy") / max(queries["queries"], 1)
    return {"doc_nnz": docs["doc_nnz"], "query_nnz": queries["query_nnz"], "FLOPS": float(np.dot(p_q, p_d))}


def read_query_vectors(encode_dir: Path) -> dict[str, dict[str, int]]:
    out = {}
    with open(Path(encode_dir) / QUERIES, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[row["id"]] = row["vector"]
    return out

