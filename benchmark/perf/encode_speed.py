"""Encode comparison: ``benchmark.splade.encoder.encode`` against sentence-transformers ``encode_document``.

Parts ``encode`` (SciFact documents, bert-tiny by default) and ``large`` (peak memory at a 50368
vocabulary). The worker (``encode_worker``, one per system in its own process) encodes the texts
(timed), then the queries (untimed), and saves both as sparse matrices.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError
from benchmark.perf.report import Row, load_text, relate
from benchmark.perf.workers import spawn, status_mb

if TYPE_CHECKING:
    import numpy as np

DATASET = "beir/scifact/test"
LARGE_VOCAB = 50368


def _load_ours(spec: dict[str, Any], info: dict[str, Any]) -> tuple[Callable[[list[str]], Any], int | None]:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from benchmark.model.heads import attach_projection_scale
    from benchmark.splade.encoder import encode

    model = AutoModelForMaskedLM.from_pretrained(spec["model"]).eval().to(spec.get("device", "cpu"))
    attach_projection_scale(model)  # a checkpoint rescaled by 'projection' carries α in its config
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])

    def run(texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        info.clear()
        return encode(
            model,
            tokenizer,
            texts,
            max_length=spec["max_length"],
            batch_size=spec["batch_size"],
            precision=spec["precision"],
            path=spec.get("path"),
            info=info,
        )

    return run, model.config.vocab_size


def _load_st(spec: dict[str, Any], info: dict[str, Any]) -> tuple[Callable[[list[str]], Any], int | None]:
    import logging

    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # MLMTransformer deprecation notice
    model = SparseEncoder(
        modules=[
            MLMTransformer(spec["model"], max_seq_length=spec["max_length"]),
            SpladePooling(pooling_strategy="max"),
        ],
        device=spec.get("device", "cpu"),
    )

    def run(texts: list[str]) -> Any:
        return model.encode_document(texts, batch_size=spec["batch_size"], show_progress_bar=False)

    return run, None  # the vocabulary size comes with the sparse tensor


ENCODERS = {"ours": _load_ours, "st": _load_st}


def _to_csr(vectors: Any, vocab: int | None) -> Any:
    """Our list of (ids, weights) or ST's sparse COO tensor → scipy CSR float32."""
    import numpy as np
    import scipy.sparse as sp

    if isinstance(vectors, list):
        indptr = np.cumsum([0] + [len(ids) for ids, _ in vectors])
        indices = np.concatenate([ids for ids, _ in vectors]) if vectors else np.zeros(0, np.int32)
        data = np.concatenate([w for _, w in vectors]) if vectors else np.zeros(0, np.float32)
        return sp.csr_matrix((data, indices, indptr), shape=(len(vectors), vocab))
    coo = vectors.coalesce().cpu()
    idx = coo.indices().numpy()
    return sp.csr_matrix((coo.values().float().numpy(), (idx[0], idx[1])), shape=tuple(coo.shape))


def encode_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Encode ``texts`` (timed) and ``queries`` (untimed) with one encoder; save vectors, return measurements."""
    import scipy.sparse as sp
    import torch

    torch.set_num_threads(spec["threads"])
    texts = json.loads(Path(spec["texts"]).read_text())
    info: dict[str, Any] = {}
    run, vocab = ENCODERS[spec["encoder"]](spec, info)
    cuda = spec.get("device", "cpu").startswith("cuda")
    if spec.get("warmup"):
        run(texts[: spec["warmup"]])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    rss_before = status_mb("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = run(texts)
    if cuda:
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = status_mb("VmHWM")
    encode_info = dict(info)
    out = Path(spec["out"])
    if spec.get("save", True):
        sp.save_npz(out.with_suffix(".docs.npz"), _to_csr(vectors, vocab))
    if spec.get("queries"):
        queries = json.loads(Path(spec["queries"]).read_text())
        sp.save_npz(out.with_suffix(".queries.npz"), _to_csr(run(queries), vocab))
    return {
        "docs": len(texts),
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_before_mb": rss_before,
        "peak_mb": peak,
        "cuda_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "info": encode_info,
    }


def _row(part: str, system: str, r: dict[str, Any], note: str = "") -> Row:
    return Row(
        part,
        system,
        r["docs"],
        r["wall_s"],
        r["docs"] / r["wall_s"],
        1000 * r["cpu_s"] / r["docs"],
        r["peak_mb"],
        r["peak_mb"] - r["rss_before_mb"],
        load=load_text(r),
        note=note,
    )


def scifact(n_docs: int) -> tuple[list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    """The first ``n_docs`` SciFact documents in corpus order, judged ones always included."""
    from benchmark.data.datasets import load_source

    docs, queries, qrels = load_source(DATASET)
    judged = {q.doc_id for q in qrels}
    fill = max(0, n_docs - len(judged))
    ids, texts = [], []
    for doc_id, text in docs:
        if doc_id in judged or fill > 0:
            fill -= doc_id not in judged
            ids.append(doc_id)
            texts.append(text)
    qrel_dict: dict[str, dict[str, int]] = {}
    for q in qrels:
        qrel_dict.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    queries = {q: t for q, t in queries.items() if q in qrel_dict}
    return ids, texts, queries, qrel_dict


def quantised(matrix: Any, scale: int) -> Any:
    from benchmark.splade.impacts import quantise

    m = matrix.copy()
    m.data = quantise(m.data, scale).astype("float64")
    m.eliminate_zeros()
    return m


def _ndcg(
    doc_ids: list[str], qids: list[str], docs: Any, queries: Any, qrels: dict[str, dict[str, int]], scale: int
) -> float:
    """nDCG@10 of exact integer dot products of quantised vectors (what Lucene impact scoring computes)."""
    import ir_measures
    import numpy as np

    d, q = quantised(docs, scale), quantised(queries, scale)
    scores = (q @ d.T).toarray()
    run = {}
    for i, qid in enumerate(qids):
        top = np.argsort(-scores[i], kind="stable")[:1000]
        run[qid] = {doc_ids[j]: float(scores[i, j]) for j in top if scores[i, j] > 0}
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10])


def _roofline(r: dict[str, Any]) -> list[str]:
    """The vocabulary head's work and speed in one encode (from ``encode(info=...)``)."""
    info = r.get("info") or {}
    if not info.get("head_s"):
        return []
    gflop = info["head_gflop_per_doc"]
    lines = [
        f"encode roofline (ours float32, path {info['path']!r}): head {gflop:.2f} GFLOP/doc dense "
        f"(2·tokens·hidden·vocab), {gflop * info['docs'] / info['head_s']:.0f} GFLOP/s dense-equivalent over "
        f"the head's {info['head_s']:.1f} s; forward {info['forward_s']:.1f} s; "
        f"{100 * info['candidates_fraction']:.2f} % of (document, term) pairs recomputed exactly"
    ]
    if info.get("timings"):
        times = ", ".join(f"{p} {1000 * t:.2f}" for p, t in sorted(info["timings"].items(), key=lambda kv: kv[1]))
        lines.append(
            f"encode path measured on the first batch (head ms/doc, thread CPU time): {times}"
            + (f"; rejected: {info['rejected']}" if info.get("rejected") else "")
            + f"; measurement took {info.get('probe_s', 0):.2f} s"
        )
    return lines


def part_encode(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    import numpy as np
    import scipy.sparse as sp

    from benchmark.splade.impacts import QUANT_SCALE

    doc_ids, texts, queries, qrels = scifact(args.docs)
    texts = texts[: args.docs]
    doc_ids = doc_ids[: args.docs]
    (work / "texts.json").write_text(json.dumps(texts))
    (work / "queries.json").write_text(json.dumps(list(queries.values())))
    base = {
        "kind": "encode",
        "model": str(args.model),
        "texts": str(work / "texts.json"),
        "queries": str(work / "queries.json"),
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "threads": args.threads,
    }
    systems = {
        "sentence-transformers": {**base, "encoder": "st"},
        "ours float32": {**base, "encoder": "ours", "precision": "float32", "path": args.path},
        "ours bfloat16": {**base, "encoder": "ours", "precision": "bfloat16"},
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    for rep in range(args.repeat):  # interleaved, so a noisy neighbour hits all systems alike
        for name, spec in systems.items():
            print(f"[perf] encode {len(texts)} docs: {name} (run {rep + 1}/{args.repeat})", flush=True)
            results[name].append(spawn(spec, work, f"enc-{name.replace(' ', '-')}"))
    best = {name: min(rs, key=lambda r: r["wall_s"]) for name, rs in results.items()}

    mats = {
        name: (
            sp.load_npz(work / f"enc-{name.replace(' ', '-')}.docs.npz"),
            sp.load_npz(work / f"enc-{name.replace(' ', '-')}.queries.npz"),
        )
        for name in systems
    }
    ref_d, _ = mats["sentence-transformers"]
    notes: dict[str, str] = {}
    for name, (d, q) in mats.items():
        ndcg = _ndcg(doc_ids, list(queries), d, q, qrels, QUANT_SCALE)
        diff = abs(d - ref_d).max()
        qd, qr = quantised(d, QUANT_SCALE), quantised(ref_d, QUANT_SCALE)
        notes[name] = f"nDCG@10 {ndcg:.4f}; max|Δw| vs ST {diff:.2e}; impacts differing {(qd != qr).nnz}/{qr.nnz}"
    info = best["ours float32"].get("info", {})
    if info.get("path"):
        notes["ours float32"] = f"path {info['path']}; " + notes["ours float32"]
    rows = [_row("encode", name, best[name], notes[name]) for name in systems]
    relate(rows, rows[0])
    ours = rows[1]
    lines = [
        f"encode: ours float32 is {ours.ratio:.2f}× sentence-transformers' docs/s at {ours.mem_ratio:.2f}× its "
        f"peak memory (goal ≥ 5× at ≤ 0.33×); bfloat16 {rows[2].ratio:.2f}× at {rows[2].mem_ratio:.2f}×; "
        f"CPU time per document {rows[0].cpu_ms_per_doc / ours.cpu_ms_per_doc:.2f}× less (wall-time ratios "
        "grow with the load: OpenMP threads that wait at barriers lose more on a busy machine)",
        *_roofline(best["ours float32"]),
        f"encode: nDCG@10 on {len(doc_ids)} SciFact docs (all judged ones included) and {len(queries)} "
        f"test queries, ranking by exact integer dot products of impacts round(w·{QUANT_SCALE})",
    ]
    np.save(work / "doc_ids.npy", np.array(doc_ids))
    return rows, lines


def _tiny_modernbert(path: Path, tokenizer_from: Path) -> Path:
    """A random ModernBertForMaskedLM with the real ModernBERT vocabulary size (50368), saved with a tokenizer."""
    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertForMaskedLM

    config = ModernBertConfig(
        vocab_size=LARGE_VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=512,
        local_attention=64,
        pad_token_id=0,
        bos_token_id=101,
        cls_token_id=101,
        eos_token_id=102,
        sep_token_id=102,
    )
    torch.manual_seed(0)
    ModernBertForMaskedLM(config).eval().save_pretrained(path)
    AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(path)
    return path


def _mem_available_mb() -> float:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def part_large(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    from transformers import AutoTokenizer

    model = _tiny_modernbert(work / "tiny-modernbert", args.model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    _, texts, _, _ = scifact(600)
    long_texts, current = [], ""
    for text in texts:  # concatenate abstracts until each text has more than max length tokens
        current = f"{current} {text}".strip()
        if len(tokenizer(current)["input_ids"]) > args.large_length:
            long_texts.append(current)
            current = ""
        if len(long_texts) == args.large_batch:
            break
    if len(long_texts) < args.large_batch:
        raise BenchmarkError(f"only {len(long_texts)} long texts from SciFact; lower --large-batch")
    (work / "long.json").write_text(json.dumps(long_texts))
    base = {
        "kind": "encode",
        "model": str(model),
        "texts": str(work / "long.json"),
        "max_length": args.large_length,
        "threads": args.threads,
        "save": False,
    }  # only memory and time matter here
    # ST holds the [B, L, V] logits about twice (mask product, then in-place relu/log1p): keep it off swap.
    logits_mb = lambda b: b * args.large_length * LARGE_VOCAB * 4 / 2**20  # noqa: E731
    st_batch = args.large_batch
    while st_batch > 1 and 2.2 * logits_mb(st_batch) + 2048 > _mem_available_mb():
        st_batch //= 2
    ours_r = spawn(
        {**base, "encoder": "ours", "precision": "float32", "batch_size": args.large_batch}, work, "large-ours"
    )
    st_texts = work / "long-st.json"
    st_texts.write_text(json.dumps(long_texts[:st_batch]))
    st_r = spawn({**base, "texts": str(st_texts), "encoder": "st", "batch_size": st_batch}, work, "large-st")
    st_note = (
        ""
        if st_batch == args.large_batch
        else (
            f"ran at batch {st_batch} (batch {args.large_batch} needs ≈{2 * logits_mb(args.large_batch) / 1024:.1f} GB "
            "of logits, more than this machine had free); memory grows linearly with batch"
        )
    )
    rows = [
        _row("large", "sentence-transformers", st_r, st_note),
        _row(
            "large",
            "ours float32",
            ours_r,
            f"batch {args.large_batch}; random weights give dense vectors "
            f"({100 * (ours_r['info'].get('candidates_fraction') or 0):.0f} % of terms recomputed exactly)",
        ),
    ]
    relate(rows, rows[0])
    lines = [
        f"large vocab {LARGE_VOCAB}, length {args.large_length}: full logits of batch {args.large_batch} = "
        f"{logits_mb(args.large_batch):.0f} MB"
    ]
    return rows, lines
