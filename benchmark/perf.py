"""``python -m benchmark.perf``: our SPLADE encoder and impact search, side by side with the reference tools.

Parts (``--only``, comma-separated, or ``all``; the default leaves out ``e2e``, which takes minutes):

* ``encode``: corpus encoding, ``benchmark.splade.encode`` (float32 and bfloat16) against
  sentence-transformers ``SparseEncoder.encode_document`` on the same model, documents, max length,
  batch size and threads; docs/s, CPU s/doc, peak RSS; and the same retrieval (nDCG@10 over exact
  integer dot products of the quantised vectors, identical impacts where precision is equal).
* ``large``: peak memory at a 50368 vocabulary (tiny random ModernBERT), batch 64 × length 512.
* ``search``: queries/s of ``benchmark.lucene.impact_search`` against Pyserini's own pre-encoded
  path (``LuceneImpactSearcher`` with a ``CachedDataQueryEncoder`` jsonl), 1 and 2 threads.
* ``e2e``: wall time of ``python -m benchmark.run --suite smoke`` (fresh runs dir), and per stage
  kind from the run's ``stages.csv``.

Each encoder runs in its own fresh subprocess (``--worker``), so its peak RSS (VmHWM) is its own and
the imports are paid by both. The machine may be shared: CPU seconds are reported next to wall time.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError, unknown

PARTS = ("encode", "large", "search", "e2e")
DEFAULT_PARTS = ("encode", "large", "search")  # e2e (a whole smoke run, minutes) only when asked
DATASET = "beir/scifact/test"
LARGE_VOCAB = 50368


# --------------------------------------------------------------------------- worker (own process)


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _load_ours(spec: dict[str, Any]):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from benchmark.splade import encode

    model = AutoModelForMaskedLM.from_pretrained(spec["model"]).eval().to(spec.get("device", "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])

    def run(texts: list[str]):
        return encode(model, tokenizer, texts, max_length=spec["max_length"], batch_size=spec["batch_size"],
                      precision=spec["precision"])

    return run, model.config.vocab_size


def _load_st(spec: dict[str, Any]):
    import logging

    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # MLMTransformer deprecation notice
    model = SparseEncoder(modules=[MLMTransformer(spec["model"], max_seq_length=spec["max_length"]),
                                   SpladePooling(pooling_strategy="max")], device=spec.get("device", "cpu"))

    def run(texts: list[str]):
        return model.encode_document(texts, batch_size=spec["batch_size"], show_progress_bar=False)

    return run, None  # the vocabulary size comes with the sparse tensor


ENCODERS = {"ours": _load_ours, "st": _load_st}


def _to_csr(vectors: Any, vocab: int):
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


def worker(spec_path: str) -> int:
    """Encode ``texts`` (timed) and ``queries`` (untimed) with one encoder; write vectors and measurements."""
    import scipy.sparse as sp
    import torch

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    texts = json.loads(Path(spec["texts"]).read_text())
    run, vocab = ENCODERS[spec["encoder"]](spec)
    cuda = spec.get("device", "cpu").startswith("cuda")
    if spec.get("warmup"):
        run(texts[: spec["warmup"]])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    rss_before = _status_mb("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = run(texts)
    if cuda:
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = _status_mb("VmHWM")
    out = Path(spec["out"])
    if spec.get("save", True):
        sp.save_npz(out.with_suffix(".docs.npz"), _to_csr(vectors, vocab))
    if spec.get("queries"):
        queries = json.loads(Path(spec["queries"]).read_text())
        sp.save_npz(out.with_suffix(".queries.npz"), _to_csr(run(queries), vocab))
    result = {"docs": len(texts), "wall_s": wall, "cpu_s": cpu, "rss_before_mb": rss_before, "peak_mb": peak,
              "cuda_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
              "torch": torch.__version__, "threads": torch.get_num_threads()}
    out.with_suffix(".json").write_text(json.dumps(result))
    return 0


# --------------------------------------------------------------------------- parent


@dataclass
class Row:
    part: str
    system: str
    docs: int | None = None
    wall_s: float = float("nan")
    docs_per_s: float = float("nan")
    cpu_ms_per_doc: float = float("nan")
    peak_mb: float = float("nan")
    working_mb: float = float("nan")
    ratio: float = float("nan")  # speed vs the part's reference (higher is better)
    mem_ratio: float = float("nan")  # peak RSS vs the part's reference (lower is better)
    note: str = ""


def _spawn(spec: dict[str, Any], work: Path, name: str) -> dict[str, Any]:
    spec_path = work / f"{name}.spec.json"
    spec = {**spec, "out": str(work / name)}
    spec_path.write_text(json.dumps(spec))
    threads = str(spec["threads"])
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log = work / f"{name}.log"
    with open(log, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "benchmark.perf", "--worker", str(spec_path)],
                              env=env, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise BenchmarkError(f"perf worker {name!r} failed (exit {proc.returncode}): {tail}; see {log}")
    return json.loads((work / f"{name}.json").read_text())


def _row(part: str, system: str, r: dict[str, Any], note: str = "") -> Row:
    return Row(part, system, r["docs"], r["wall_s"], r["docs"] / r["wall_s"], 1000 * r["cpu_s"] / r["docs"],
               r["peak_mb"], r["peak_mb"] - r["rss_before_mb"], note=note)


def _relate(rows: list[Row], reference: Row) -> None:
    for row in rows:
        row.ratio = row.docs_per_s / reference.docs_per_s
        row.mem_ratio = row.peak_mb / reference.peak_mb


def _scifact(n_docs: int) -> tuple[list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    """The first ``n_docs`` SciFact documents in corpus order, judged ones always included."""
    from benchmark.data import load_source

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


def _ndcg(doc_ids: list[str], qids: list[str], docs, queries, qrels, scale: int) -> float:
    """nDCG@10 of exact integer dot products of quantised vectors (what Lucene impact scoring computes)."""
    import ir_measures
    import numpy as np

    d, q = _quantised(docs, scale), _quantised(queries, scale)
    scores = (q @ d.T).toarray()
    run = {}
    for i, qid in enumerate(qids):
        top = np.argsort(-scores[i], kind="stable")[:1000]
        run[qid] = {doc_ids[j]: float(scores[i, j]) for j in top if scores[i, j] > 0}
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10])


def _quantised(matrix, scale: int):
    from benchmark.splade import quantise

    m = matrix.copy()
    m.data = quantise(m.data, scale).astype("float64")
    m.eliminate_zeros()
    return m


def part_encode(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    import numpy as np
    import scipy.sparse as sp

    from benchmark.splade import QUANT_SCALE

    doc_ids, texts, queries, qrels = _scifact(args.docs)
    texts = texts[: args.docs]
    doc_ids = doc_ids[: args.docs]
    (work / "texts.json").write_text(json.dumps(texts))
    (work / "queries.json").write_text(json.dumps(list(queries.values())))
    base = {"model": str(args.model), "texts": str(work / "texts.json"), "queries": str(work / "queries.json"),
            "max_length": args.max_length, "batch_size": args.batch_size, "threads": args.threads}
    systems = {
        "sentence-transformers": {**base, "encoder": "st"},
        "ours float32": {**base, "encoder": "ours", "precision": "float32"},
        "ours bfloat16": {**base, "encoder": "ours", "precision": "bfloat16"},
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    for rep in range(args.repeat):  # interleaved, so a noisy neighbour hits all systems alike
        for name, spec in systems.items():
            print(f"[perf] encode {len(texts)} docs: {name} (run {rep + 1}/{args.repeat})", flush=True)
            results[name].append(_spawn(spec, work, f"enc-{name.replace(' ', '-')}"))
    best = {name: min(rs, key=lambda r: r["wall_s"]) for name, rs in results.items()}

    mats = {name: (sp.load_npz(work / f"enc-{name.replace(' ', '-')}.docs.npz"),
                   sp.load_npz(work / f"enc-{name.replace(' ', '-')}.queries.npz")) for name in systems}
    ref_d, ref_q = mats["sentence-transformers"]
    notes: dict[str, str] = {}
    lines: list[str] = []
    for name, (d, q) in mats.items():
        ndcg = _ndcg(doc_ids, list(queries), d, q, qrels, QUANT_SCALE)
        diff = abs(d - ref_d).max()
        qd, qr = _quantised(d, QUANT_SCALE), _quantised(ref_d, QUANT_SCALE)
        changed = (qd != qr).nnz
        notes[name] = f"nDCG@10 {ndcg:.4f}; max|Δw| vs ST {diff:.2e}; impacts differing {changed}/{qr.nnz}"
    import torch

    from benchmark.splade import has_fast_bf16

    screened = has_fast_bf16(torch.device("cpu"))
    lines.append("encode: ours float32 " + ("screens the vocabulary in bf16 and recomputes candidates in float32 "
                                           "(this CPU has bf16 dot products)" if screened else
                                           "runs plain float32 (no bf16 dot products on this CPU)"))
    lines.append(f"encode: nDCG@10 on {len(doc_ids)} SciFact docs (all judged ones included) and {len(queries)} "
                 f"test queries, ranking by exact integer dot products of impacts round(w·{QUANT_SCALE})")
    rows = [_row("encode", name, best[name], notes[name]) for name in systems]
    _relate(rows, rows[0])
    np.save(work / "doc_ids.npy", np.array(doc_ids))
    return rows, lines


def _tiny_modernbert(path: Path, tokenizer_from: Path) -> Path:
    """A random ModernBertForMaskedLM with the real ModernBERT vocabulary size (50368), saved with a tokenizer."""
    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertForMaskedLM

    config = ModernBertConfig(vocab_size=LARGE_VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                              num_attention_heads=2, max_position_embeddings=512, local_attention=64,
                              pad_token_id=0, bos_token_id=101, cls_token_id=101, eos_token_id=102, sep_token_id=102)
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
    _, texts, _, _ = _scifact(600)
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
    base = {"model": str(model), "texts": str(work / "long.json"), "max_length": args.large_length,
            "threads": args.threads}
    # ST holds the [B, L, V] logits about twice (mask product, then in-place relu/log1p): keep it off swap.
    logits_mb = lambda b: b * args.large_length * LARGE_VOCAB * 4 / 2**20  # noqa: E731
    st_batch = args.large_batch
    while st_batch > 1 and 2.2 * logits_mb(st_batch) + 2048 > _mem_available_mb():
        st_batch //= 2
    base["save"] = False  # only memory and time matter here
    ours_r = _spawn({**base, "encoder": "ours", "precision": "float32", "batch_size": args.large_batch},
                    work, "large-ours")
    st_texts = work / "long-st.json"
    st_texts.write_text(json.dumps(long_texts[:st_batch]))
    st_r = _spawn({**base, "texts": str(st_texts), "encoder": "st", "batch_size": st_batch}, work, "large-st")
    st_note = "" if st_batch == args.large_batch else (
        f"ran at batch {st_batch} (batch {args.large_batch} needs ≈{2 * logits_mb(args.large_batch) / 1024:.1f} GB "
        "of logits, more than this machine had free); memory grows linearly with batch")
    rows = [_row("large", "sentence-transformers", st_r, st_note),
            _row("large", "ours float32", ours_r, f"batch {args.large_batch}")]
    _relate(rows, rows[0])
    lines = [f"large vocab {LARGE_VOCAB}, length {args.large_length}: full logits of batch {args.large_batch} = "
             f"{logits_mb(args.large_batch):.0f} MB"]
    return rows, lines


def part_search(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    import numpy as np
    import scipy.sparse as sp
    from transformers import AutoTokenizer

    from benchmark import lucene
    from benchmark.encode import vocabulary_terms
    from benchmark.splade import QUANT_SCALE

    name = "enc-ours-float32"
    if not (work / f"{name}.docs.npz").exists():
        raise BenchmarkError("--only search needs the encode part's vectors; run with --only encode,search")
    docs = _quantised(sp.load_npz(work / f"{name}.docs.npz"), QUANT_SCALE).tocsr()
    qmat = _quantised(sp.load_npz(work / f"{name}.queries.npz"), QUANT_SCALE).tocsr()
    doc_ids = [str(d) for d in np.load(work / "doc_ids.npy")]
    _, _, queries, qrels = _scifact(args.docs)
    terms = vocabulary_terms(AutoTokenizer.from_pretrained(args.model), docs.shape[1])

    def vec(m, i):
        row = m.getrow(i)
        return {terms[j]: int(w) for j, w in zip(row.indices.tolist(), row.data.tolist())}

    coll, index = work / "collection", work / "index"
    for folder in (coll, index):  # Anserini would add to an existing index
        shutil.rmtree(folder, ignore_errors=True)
    coll.mkdir()
    with open(coll / "part-00000.jsonl", "w") as fh:
        for i, doc_id in enumerate(doc_ids):
            fh.write(json.dumps({"id": doc_id, "contents": "", "vector": vec(docs, i)}) + "\n")
    qvecs = {qid: vec(qmat, i) for i, qid in enumerate(queries)}
    t = time.perf_counter()
    lucene.build_impact_index(coll, index, threads=args.threads)
    index_s = time.perf_counter() - t
    cached = work / "queries-cached.jsonl"
    with open(cached, "w") as fh:  # Pyserini's own pre-encoded query format
        for qid, v in qvecs.items():
            fh.write(json.dumps({"id": qid, "contents": qid, "vector": v}) + "\n")

    lucene.start_jvm()
    from pyserini.search.lucene import LuceneImpactSearcher

    opened: list[float] = []

    def pyserini_path(threads: int):
        t = time.perf_counter()
        searcher = LuceneImpactSearcher(str(index), str(cached))
        opened.append(time.perf_counter() - t)
        live = [q for q in qvecs if any(t in searcher.idf for t in qvecs[q])]
        hits = searcher.batch_search(live, live, k=1000, threads=threads)
        searcher.close()
        return {q: [(h.docid, float(h.score)) for h in hits.get(q, [])] for q in qvecs}

    def ours_path(threads: int):
        return lucene.impact_search(index, qvecs, k=1000, threads=threads)

    systems = {"pyserini pre-encoded": pyserini_path, "ours impact_search": ours_path}
    for fn in systems.values():  # JIT and page-cache warm-up, untimed
        fn(1)
    rows, lines = [], [f"impact index of {len(doc_ids)} docs built in {index_s:.1f} s"]
    for threads in (1, 2):
        best = {name: float("inf") for name in systems}
        hits = {}
        opened.clear()
        for rep in range(args.search_repeat):  # alternate the order: neither side always runs first
            for name in (list(systems) if rep % 2 == 0 else list(systems)[::-1]):
                t = time.perf_counter()
                hits[name] = systems[name](threads)
                best[name] = min(best[name], time.perf_counter() - t)
        ref = hits["pyserini pre-encoded"]
        for name in systems:
            same = all([d for d, _ in hits[name][q]] == [d for d, _ in ref[q]] for q in qvecs)
            note = f"queries/s incl. opening the searcher; same rankings as Pyserini: {same}"
            if name == "pyserini pre-encoded":
                note += f"; opening alone {min(opened):.2f} s"
            rows.append(Row("search", f"{name} ({threads} thr)", len(qvecs), best[name], len(qvecs) / best[name],
                            note=note))
        rows[-2].ratio, rows[-1].ratio = 1.0, rows[-1].docs_per_s / rows[-2].docs_per_s
    import ir_measures

    hits = lucene.impact_search(index, qvecs, k=1000, threads=args.threads)
    run = {q: {d: s for d, s in h} for q, h in hits.items()}
    ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]
    lines.append(f"Lucene nDCG@10 (ours float32 vectors): {ndcg:.4f}; k=1000; best of {args.search_repeat} runs")
    return rows, lines


def part_e2e(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    runs, results = work / "e2e-runs", work / "e2e-results"
    for folder in (runs, results):  # a fresh run: no stage may come from a cache
        shutil.rmtree(folder, ignore_errors=True)
    t = time.perf_counter()
    log = work / "e2e.log"
    env = dict(os.environ)
    env.setdefault("BENCHMARK_MODEL_DIR", str(args.model.parent))  # the suite's "bert-tiny" backbone
    env.setdefault("HF_HUB_OFFLINE", "1")
    with open(log, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "benchmark.run", "--suite", "smoke", "--runs-dir", str(runs),
                               "--results-dir", str(results), "--threads", str(args.threads), "--no-progress"],
                              stdout=fh, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise BenchmarkError(f"smoke run failed (exit {proc.returncode}): {tail}; see {log}")
    rows = [Row("e2e", "benchmark.run --suite smoke", wall_s=wall, note="total wall, fresh runs dir")]
    timings = results / "smoke" / "stages.csv"
    if not timings.exists():
        return rows, ["no per-stage timings: benchmark.run wrote no results/smoke/stages.csv"]
    per_kind: dict[str, list[float]] = {}
    for rec in csv.DictReader(timings.open()):
        per_kind.setdefault(rec["stage"], []).append(float(rec["seconds"]))
    for kind, secs in sorted(per_kind.items(), key=lambda kv: -sum(kv[1])):
        rows.append(Row("e2e", f"stage {kind}", len(secs), sum(secs),
                        note=f"{100 * sum(secs) / wall:.0f}% of the total; n = stages of this kind"))
    return rows, []


PART_FUNCS = {"encode": part_encode, "large": part_large, "search": part_search, "e2e": part_e2e}


# --------------------------------------------------------------------------- report

COLUMNS = [("system", "system", "{}"), ("docs", "n", "{}"), ("wall_s", "wall s", "{:.1f}"),
           ("docs_per_s", "items/s", "{:.1f}"), ("cpu_ms_per_doc", "CPU ms/item", "{:.1f}"),
           ("peak_mb", "peak MB", "{:.0f}"), ("working_mb", "Δ MB", "{:.0f}"), ("ratio", "speed×", "{:.2f}"),
           ("mem_ratio", "mem×", "{:.2f}")]


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    return spec.format(value)


def markdown(rows: list[Row], lines: list[str], args: argparse.Namespace) -> str:
    out = io.StringIO()
    out.write("# Performance: benchmark.splade / impact search vs sentence-transformers / Pyserini\n\n")
    out.write(f"model {args.model}, {args.threads} threads, batch {args.batch_size}, max length {args.max_length}; "
              "each encoder in its own subprocess (peak = its VmHWM; Δ = peak − RSS just before encoding); "
              "speed× and mem× are relative to the first row of each part.\n\n")
    for part in PARTS:
        part_rows = [r for r in rows if r.part == part]
        if not part_rows:
            continue
        out.write(f"## {part}\n\n| {' | '.join(h for _, h, _ in COLUMNS)} | note |\n")
        out.write("|" + "---|" * (len(COLUMNS) + 1) + "\n")
        for r in part_rows:
            cells = [_fmt(getattr(r, k), f) for k, _, f in COLUMNS]
            out.write(f"| {' | '.join(cells)} | {r.note} |\n")
        out.write("\n")
    for line in lines:
        out.write(f"- {line}\n")
    return out.getvalue()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    fields = list(asdict(rows[0])) if rows else list(Row.__dataclass_fields__)
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    for r in rows:
        writer.writerow(asdict(r))
    return buf.getvalue()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    default_model = Path(os.environ.get("BENCHMARK_MODEL_DIR", "/work/shared/models")) / "bert-tiny"
    p = argparse.ArgumentParser(prog="python -m benchmark.perf", description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(DEFAULT_PARTS),
                   help=f"comma-separated parts of {', '.join(PARTS)}, or 'all' (default: {','.join(DEFAULT_PARTS)})")
    p.add_argument("--docs", type=int, default=2000, help="SciFact documents to encode (judged ones included)")
    p.add_argument("--model", type=Path, default=default_model, help="a *ForMaskedLM folder (default bert-tiny)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--repeat", type=int, default=1, help="encode runs per system (best wall time kept)")
    p.add_argument("--large-batch", type=int, default=64)
    p.add_argument("--large-length", type=int, default=512)
    p.add_argument("--search-repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("results/perf"))
    p.add_argument("--work", type=Path, help="keep intermediate files here (default: a temp dir)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker)
    try:
        parts = list(PARTS) if args.only.strip() == "all" else [p.strip() for p in args.only.split(",") if p.strip()]
        for p in parts:
            if p not in PART_FUNCS:
                raise unknown("perf part", p, PARTS, "Pass --only with a comma-separated subset, or --only all")
        for flag in ("docs", "threads", "batch_size", "max_length", "repeat", "large_batch", "large_length",
                     "search_repeat"):
            if getattr(args, flag) < 1:
                value = getattr(args, flag)
                raise BenchmarkError(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
        if not (args.model / "config.json").exists():
            raise BenchmarkError(f"--model {args.model} is not a model folder (no config.json); "
                                 "pass a *ForMaskedLM folder")
        rows, lines, failed = [], [], []
        with tempfile.TemporaryDirectory(prefix="perf-") as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            for part in PARTS:
                if part not in parts:
                    continue
                load = os.getloadavg()[0]
                try:
                    r, lns = PART_FUNCS[part](args, work)
                    lns = [*lns, f"{part}: 1-min load average {load:.1f} → {os.getloadavg()[0]:.1f} "
                                 f"on {os.cpu_count()} CPUs (a shared machine slows wall time, CPU ms less)"]
                except BenchmarkError as exc:  # report the other parts all the same
                    r, lns = [], [f"{part}: FAILED: {exc}"]
                    failed.append(part)
                rows += r
                lines += lns
                print(markdown(r, lns, args).split("\n\n", 2)[-1], flush=True)
        _write(args.out / "perf.csv", _csv(rows))
        _write(args.out / "perf.md", markdown(rows, lines, args))
        print(f"[perf] wrote {args.out / 'perf.md'} and {args.out / 'perf.csv'}")
        if failed:
            print(f"error: perf part(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1 if failed else 0
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
