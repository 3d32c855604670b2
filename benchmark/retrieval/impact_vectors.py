"""The encode stages: a SPLADE model turns a corpus and a query set into integer impact vectors.

Documents (stage ``encode``) go to ``docs/part-NNNNN.jsonl`` (Pyserini JsonVectorCollection shards),
queries (stage ``queries``) to ``queries.jsonl``; both as ``{token: int}`` after quantisation (see
``benchmark.splade.impacts.quantise``:
Anserini truncates float impacts, so we round ourselves). Each shard is renamed into place only when
whole, so a killed encode resumes at the first missing shard.

Serialising a shard (quantise, term strings, JSON) costs ~70 µs per document of pure Python: 10 minutes
for MS MARCO's 8.8M passages, as long as a GPU needs to encode them. So every shard but the last is
written by a pool of writer processes while the model encodes the next one (processes, not threads:
a thread would hold the GIL that the encode loop needs to launch kernels). Tokenisation (~30 µs per
passage) runs one shard ahead in a thread: the fast tokenizer releases the GIL.

On a cluster (``benchmark.pipeline.ray_executor``) the stage fans out instead: one task per missing shard,
spread over every worker, each encoding its block of documents with the same ``DocEncoder.shard``
into the same partial folder; ``finalise_docs`` then sums the shards' stats, as the local path does.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.common import kill_points
from benchmark.common.atomic import atomic_path, save_npy, write_json
from benchmark.common.errors import BenchmarkError
from benchmark.formats import documents as corpus, query_texts as topics, vectors

ENCODER_INFO = "encoder"  # per-shard notes of what the encoder measured, folded into the record at the end
#: Writer processes for document shards (at most; one core is left to the encode loop).
MAX_WRITERS = 4
#: ``[encode] compile``: how the documents' encoder body (everything before the MLM head) runs.
#: "inductor" is ``torch.compile(body, dynamic=True)``: kernels fused differently round differently,
#: so it is another computation with its own stage ids, deterministic as the eager one is.
COMPILERS = ("none", "inductor")


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


def to_vector(ids: np.ndarray, weights: np.ndarray, terms: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Quantised ``{term: impact}`` of one SPLADE vector, and the vocabulary ids it kept (for df/qf counts)."""
    from benchmark.splade.impacts import quantise_vector

    kept, impacts = quantise_vector(ids, weights)
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


def write_shard(
    shard: Path, doc_ids: list[str], reps: list[tuple[np.ndarray, np.ndarray]], terms: list[str] | None = None
) -> tuple[np.ndarray, int]:
    """One JsonVectorCollection shard, then its stats (``.stats.npz``: per-term document frequencies
    and the number of empty vectors, which Lucene does not index), each atomic.

    A shard is finished when both files exist; a kill between the two redoes the shard.
    """
    terms = _WRITER_TERMS if terms is None else terms
    df = np.zeros(len(terms), dtype=np.int64)
    empty = 0

    def rows() -> Iterator[vectors.Vector]:
        nonlocal empty
        for doc_id, (ids, w) in zip(doc_ids, reps):
            kept, vector = to_vector(ids, w, terms)
            df[kept] += 1
            empty += not vector
            yield vectors.Vector(doc_id, vector)

    vectors.write_doc_vectors(shard, rows())
    with atomic_path(_stats_path(shard)) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, df=df, empty=np.int64(empty))
    return df, empty


def read_shard_stats(shard: Path) -> tuple[np.ndarray, int]:
    with np.load(_stats_path(shard)) as stats:
        return stats["df"], int(stats["empty"])


def _stats_path(shard: Path) -> Path:
    return shard.with_name(shard.name.replace(".jsonl", ".stats.npz"))


def _writer_pool(terms: list[str], workers: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_writer_init, initargs=(terms,)
    )


def load_model(model_dir: Path, attn_implementation: str = "sdpa", compile: str = "none") -> tuple[Any, Any]:
    """Load a saved ``*ForMaskedLM`` for inference (float32 weights; bf16 is autocast in ``encode``),
    on the GPU when there is one.

    The attention implementation is pinned (transformers' default has changed between versions); the
    loaded one is ``model.config._attn_implementation``. ``'varlen'`` (``benchmark.model.varlen``) packs
    each batch's documents into one row. ``compile`` is one of ``COMPILERS`` (see ``compile_body``).
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from benchmark.model import varlen
    from benchmark.model.checkpoints import quiet_transformers

    if attn_implementation == varlen.NAME:
        varlen.register()
    with quiet_transformers():
        model = AutoModelForMaskedLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation=attn_implementation
        )
    if attn_implementation == varlen.NAME:
        varlen.check(model, str(model_dir))
    from benchmark.model.heads import attach_projection_scale

    attach_projection_scale(model)  # the projection α of method 'projection', from config.json
    model.eval()
    if torch.cuda.is_available():
        model.to("cuda")
    compile_body(model, compile)
    return model, AutoTokenizer.from_pretrained(model_dir)


def compile_body(model: Any, compile: str) -> None:
    """Compile the encoder body in place, the head left eager: ``splade.encode`` stops the forward at
    the head's input, and the exact head runs outside any graph.

    Measured on one H200 (``results/gpu/gpu_profile.json``): ModernBERT-base's forward 4.8 → 1.95 s
    per 40k passages. The first batches pay the compilation (49 s there; about 12 s for bert-tiny on
    2 CPU cores, where it gains nothing).
    """
    if compile not in COMPILERS:
        raise BenchmarkError(
            f"compile = {compile!r}; valid: {', '.join(COMPILERS)}; "
            'set [encode] compile = "none" to run the body eagerly'
        )
    if compile == "none":
        return
    import torch

    setattr(model, model.base_model_prefix, torch.compile(model.base_model, dynamic=True, backend=compile))


@dataclass(frozen=True)
class DocShard:
    """Shard ``n`` of a corpus: ``count`` documents from byte ``offset`` of ``corpus/docs.jsonl``."""

    n: int
    offset: int
    count: int


def plan_shards(corpus_dir: Path, shard_size: int) -> list[DocShard]:
    """The corpus cut into blocks of ``shard_size`` documents (the last one shorter), by one pass over
    the lines of ``corpus/docs.jsonl`` that parses nothing. The cut is the local encode's: shard n
    holds documents ``n·shard_size`` to ``(n+1)·shard_size − 1`` in corpus order."""
    shards: list[list[int]] = []
    offset = 0
    with open(corpus.docs_path(corpus_dir), "rb") as fh:
        for i, line in enumerate(fh):
            if i % shard_size == 0:
                shards.append([len(shards), offset, 0])
            shards[-1][2] += 1
            offset += len(line)
    return [DocShard(*s) for s in shards]


def read_shard_docs(corpus_dir: Path, shard: DocShard) -> list[tuple[str, str]]:
    """The documents of one shard, as ``corpus.read_docs`` yields them (JSON never holds a raw newline)."""
    out: list[tuple[str, str]] = []
    with open(corpus.docs_path(corpus_dir), "rb") as fh:
        fh.seek(shard.offset)
        for _ in range(shard.count):
            out.append(corpus.parse_doc(fh.readline().decode("utf-8")))
    return out


def shard_path(docs_dir: Path, n: int) -> Path:
    return vectors.shard_path(docs_dir, n)


def shard_done(docs_dir: Path, n: int) -> bool:
    """Both files of shard n exist (each appears whole; a kill between the two redoes the shard)."""
    shard = shard_path(docs_dir, n)
    return shard.exists() and _stats_path(shard).exists()


class DocEncoder:
    """A model ready to encode document shards: what the local encode stage and every shard task of a
    cluster share, so both write the same bytes."""

    def __init__(
        self,
        model_dir: Path,
        *,
        max_length: int,
        batch_size: int,
        precision: str = "float32",
        attn_implementation: str = "sdpa",
        compile: str = "none",
    ) -> None:
        self.key = (str(model_dir), max_length, batch_size, precision, attn_implementation, compile)
        self.model, self.tokenizer = load_model(model_dir, attn_implementation, compile)
        self.vocab = int(self.model.config.vocab_size)
        self.terms = vocabulary_terms(self.tokenizer, self.vocab)
        self.max_length, self.batch_size, self.precision = max_length, batch_size, precision

    def tokenize(self, chunk: list[tuple[str, str]]) -> Any:
        from benchmark.splade.forward import tokenize

        return tokenize(self.tokenizer, [text for _, text in chunk], self.max_length)

    def shard(
        self,
        docs_dir: Path,
        n: int,
        chunk: list[tuple[str, str]],
        *,
        tokens: Any = None,
        progress: bool = False,
        write: Any = None,
    ) -> Any:
        """Shard n: encode ``chunk`` (or its ``tokens``), then write ``part-n`` and its stats.

        ``write(write_shard, path, ids, reps)``, e.g. a writer pool's ``submit``, lets the caller encode
        the next shard while this one is serialised; it gets no vocabulary (the pool holds it).
        Without it the shard is written here and its stats returned.
        """
        from benchmark.splade.encoder import encode

        info: dict[str, Any] = {}
        reps = encode(
            self.model,
            self.tokenizer,
            tokens if tokens is not None else [text for _, text in chunk],
            max_length=self.max_length,
            batch_size=self.batch_size,
            progress=f"encode docs {n}" if progress else None,
            precision=self.precision,
            info=info,
        )
        info_dir = Path(docs_dir).parent / ENCODER_INFO
        info_dir.mkdir(exist_ok=True)
        write_json(info_dir / f"{n:05d}.json", {**info, "docs": len(chunk)})
        kill_points.point("encode:encoded")
        doc_ids = [doc_id for doc_id, _ in chunk]
        if write is not None:
            return write(write_shard, shard_path(docs_dir, n), doc_ids, reps)
        return write_shard(shard_path(docs_dir, n), doc_ids, reps, self.terms)


def encoder_summary(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``splade.encode`` measured, over shards: the path each chose (all give the same vectors, so
    shards may differ), the first measurement's timings, and the time split of the whole stage."""
    if not infos:
        return {}
    docs = sum(i.get("docs", 0) for i in infos) or 1
    paths: dict[str, int] = {}
    for i in infos:
        paths[i.get("path", "?")] = paths.get(i.get("path", "?"), 0) + 1
    measured = next((i for i in infos if i.get("measured")), infos[0])
    screened = [i for i in infos if i.get("candidates_fraction") is not None]  # bfloat16 runs no screen
    fraction = (
        (
            sum(i["candidates_fraction"] * i.get("docs", 0) for i in screened)
            / max(sum(i.get("docs", 0) for i in screened), 1)
        )
        if screened
        else None
    )
    return {
        "paths": paths,
        "timings": measured.get("timings"),
        "rejected": measured.get("rejected"),
        "candidates_fraction": fraction,
        "documents": docs,
        "forward_s": sum(i.get("forward_s") or 0.0 for i in infos),
        "head_s": sum(i.get("head_s") or 0.0 for i in infos),
        "head_gflop_per_doc": measured.get("head_gflop_per_doc"),
        "threads": measured.get("threads"),
        "device": measured.get("device"),
    }


def finalise_docs(
    out: Path,
    shards: int,
    documents: int,
    vocab: int,
    *,
    max_length: int,
    precision: str,
    attn_implementation: str,
    compile: str = "none",
) -> dict[str, Any]:
    """The encode stage's last step, however its shards were made: ``df.npy`` (the shards' document
    frequencies summed) and the record, with what the encoder measured (``encoder``; the per-shard
    notes are folded in and removed, so the stage's files are the same bytes on every executor)."""
    df, empty = np.zeros(vocab, dtype=np.int64), 0
    for n in range(shards):
        shard_df, shard_empty = read_shard_stats(shard_path(out / "docs", n))
        df += shard_df
        empty += shard_empty
    save_npy(out / vectors.DF, df)
    info_dir = out / ENCODER_INFO
    infos = [json.loads(p.read_text()) for p in sorted(info_dir.glob("*.json"))] if info_dir.is_dir() else []
    shutil.rmtree(info_dir, ignore_errors=True)
    return {
        "documents": documents,
        "empty_documents": empty,
        "doc_nnz": float(df.sum() / max(documents, 1)),
        "vocab_size": vocab,
        "max_length": max_length,
        "precision": precision,
        "attn_implementation": attn_implementation,
        **({"compile": compile} if compile != "none" else {}),
        "encoder": encoder_summary(infos),
    }


@dataclass(frozen=True)
class ShardTask:
    """One shard of an encode stage, as a cluster runs it: everything ``encode_shard_task`` needs."""

    model_dir: Path
    corpus_dir: Path
    out: Path  # the stage's partial folder
    shard: DocShard
    max_length: int
    batch_size: int
    precision: str
    attn_implementation: str
    compile: str = "none"

    def encoder_key(self) -> tuple[Any, ...]:
        return (
            str(self.model_dir),
            self.max_length,
            self.batch_size,
            self.precision,
            self.attn_implementation,
            self.compile,
        )


_ENCODER: DocEncoder | None = None  # a shard worker keeps its model between shard tasks


def encode_shard_task(task: ShardTask) -> int:
    """Encode one shard into the partial folder, unless an earlier attempt finished it; its documents."""
    global _ENCODER
    docs_dir = task.out / "docs"
    if not shard_done(docs_dir, task.shard.n):
        if _ENCODER is None or _ENCODER.key != task.encoder_key():
            _ENCODER = None  # free the previous model first
            _ENCODER = DocEncoder(
                task.model_dir,
                max_length=task.max_length,
                batch_size=task.batch_size,
                precision=task.precision,
                attn_implementation=task.attn_implementation,
                compile=task.compile,
            )
        docs_dir.mkdir(parents=True, exist_ok=True)
        _ENCODER.shard(docs_dir, task.shard.n, read_shard_docs(task.corpus_dir, task.shard))
    return task.shard.count


def _model_vocab(model_dir: Path, out: Path) -> int:
    """The vocabulary size, from shard 0's stats (one entry per term) or, for an empty corpus, the config."""
    stats = _stats_path(shard_path(out / "docs", 0))
    if stats.exists():
        return len(read_shard_stats(shard_path(out / "docs", 0))[0])
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(model_dir).vocab_size)


def encode_docs_stage(
    model_dir: Path,
    corpus_dir: Path,
    out: Path,
    *,
    max_length: int,
    batch_size: int,
    shard_size: int,
    precision: str = "float32",
    attn_implementation: str = "sdpa",
    compile: str = "none",
    progress: bool = True,
    cluster: Any = None,
) -> dict[str, Any]:
    """Documents → JsonVectorCollection shards, plus ``df.npy`` (per-term document frequency, for FLOPS).

    ``cluster`` (an executor's, with ``map(fn, tasks, kind, total)``) encodes the shards as tasks spread over
    its workers; without it they are encoded here, one after another. Either way the shards and
    ``df.npy`` are the same bytes.
    """
    settings: dict[str, Any] = {
        "max_length": max_length,
        "precision": precision,
        "attn_implementation": attn_implementation,
        "compile": compile,
    }
    docs_dir = out / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    if cluster is not None:
        shards = plan_shards(corpus_dir, shard_size)
        tasks = [
            ShardTask(
                Path(model_dir),
                Path(corpus_dir),
                Path(out),
                s,
                max_length,
                batch_size,
                precision,
                attn_implementation,
                compile,
            )
            for s in shards
            if not shard_done(docs_dir, s.n)
        ]
        cluster.map(encode_shard_task, tasks, "encode", total=len(shards))
        return finalise_docs(out, len(shards), sum(s.count for s in shards), _model_vocab(model_dir, out), **settings)
    return _encode_here(
        model_dir, corpus_dir, out, batch_size=batch_size, shard_size=shard_size, progress=progress, **settings
    )


def _encode_here(
    model_dir: Path,
    corpus_dir: Path,
    out: Path,
    *,
    max_length: int,
    batch_size: int,
    shard_size: int,
    precision: str,
    attn_implementation: str,
    compile: str,
    progress: bool,
) -> dict[str, Any]:
    """The shards in this process: the next shard is tokenised in a thread and the previous ones are
    serialised by writer processes while the model encodes."""
    from concurrent.futures import Future, ThreadPoolExecutor

    encoder = DocEncoder(
        model_dir,
        max_length=max_length,
        batch_size=batch_size,
        precision=precision,
        attn_implementation=attn_implementation,
        compile=compile,
    )
    docs_dir = out / "docs"
    n_docs, n_shards = 0, 0
    pending: deque[Future[Any]]  # the writer pool's futures, oldest first
    pool, pending = None, deque()
    writers = max(1, min(MAX_WRITERS, (os.cpu_count() or 2) - 1))

    def finished(result: Any) -> None:
        kill_points.point("encode:shard")

    ahead = ThreadPoolExecutor(1, thread_name_prefix="tokenize")  # the only user of the tokenizer
    tokens: dict[int, Future[Any]] = {}
    docs = corpus.read_docs(corpus.docs_path(corpus_dir))
    try:
        for n, (chunk, following) in enumerate(_with_next(_chunks(docs, shard_size))):
            n_docs += len(chunk)
            n_shards = n + 1
            if shard_done(docs_dir, n):
                continue  # finished before a kill; shards only appear whole
            if n not in tokens:
                tokens[n] = ahead.submit(encoder.tokenize, chunk)
            if following is not None and not shard_done(docs_dir, n + 1):
                tokens[n + 1] = ahead.submit(encoder.tokenize, following)
            if following is None:  # nothing left to overlap with
                finished(encoder.shard(docs_dir, n, chunk, tokens=tokens.pop(n).result(), progress=progress))
                continue
            pool = pool or _writer_pool(encoder.terms, writers)
            pending.append(
                encoder.shard(docs_dir, n, chunk, tokens=tokens.pop(n).result(), progress=progress, write=pool.submit)
            )
            while len(pending) > writers:  # bounded: encoded shards wait in memory
                finished(pending.popleft().result())
        while pending:
            finished(pending.popleft().result())
    finally:
        ahead.shutdown(cancel_futures=True)
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return finalise_docs(
        out,
        n_shards,
        n_docs,
        encoder.vocab,
        max_length=max_length,
        precision=precision,
        attn_implementation=attn_implementation,
        compile=compile,
    )


def encode_queries_stage(
    model_dir: Path,
    topics_dir: Path,
    out: Path,
    *,
    max_length: int,
    batch_size: int,
    precision: str = "float32",
    attn_implementation: str = "sdpa",
    progress: bool = True,
) -> dict[str, Any]:
    """Queries → ``queries.jsonl`` of ``{token: int}``, plus ``qf.npy`` (per-term query frequency)."""
    from benchmark.splade.encoder import encode

    model, tokenizer = load_model(model_dir, attn_implementation)
    vocab = int(model.config.vocab_size)
    terms = vocabulary_terms(tokenizer, vocab)
    queries = dict(topics.read_queries(Path(topics_dir) / topics.QUERIES))
    qids = list(queries)
    info: dict[str, Any] = {}
    reps = encode(
        model,
        tokenizer,
        [queries[q] for q in qids],
        max_length=max_length,
        batch_size=batch_size,
        progress="encode queries" if progress else None,
        precision=precision,
        info=info,
    )
    qf = np.zeros(vocab, dtype=np.int64)
    qvecs: dict[str, dict[str, int]] = {}
    for qid, (ids, w) in zip(qids, reps):
        kept, qvecs[qid] = to_vector(ids, w, terms)
        qf[kept] += 1
    kill_points.point("encode:queries")
    save_npy(out / vectors.QF, qf)
    vectors.write_query_vectors(out / vectors.QUERIES, (vectors.Vector(q, v) for q, v in qvecs.items()))
    return {
        "queries": len(qvecs),
        "query_nnz": float(qf.sum() / max(len(qvecs), 1)),
        "empty_queries": sum(1 for v in qvecs.values() if not v),
        "vocab_size": vocab,
        "max_length": max_length,
        "precision": precision,
        "attn_implementation": attn_implementation,
        "encoder": encoder_summary([{**info, "docs": len(qids)}]),
    }


def read_query_vectors(encode_dir: Path) -> dict[str, dict[str, int]]:
    return vectors.read_vector_map(Path(encode_dir) / vectors.QUERIES)
