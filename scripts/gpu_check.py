"""GPU checks, one short run on a lent GPU: prints JSON and writes it to $OUT.

1. bf16 encoding throughput of a BERT-base-sized SPLADE encoder built from its config (random
   weights; the decoder bias is shifted so documents keep ~trained-SPLADE sparsity, ~100-300
   non-zeros, since random heads are dense and then host-side extraction, not the GPU, sets the
   rate), extrapolated to MS MARCO's 8.84M passages.
2. bf16 training steps of a tiny ModernBERT config (vocabulary 50368) through ``train_splade``.

Usage: BENCHMARK_MODEL_DIR=<folder with bert-tiny/> python scripts/gpu_check.py
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

MSMARCO_PASSAGES = 8_841_823


def synthetic_texts(tokenizer, n: int, lo: int, hi: int, seed: int = 0) -> list[str]:
    """Random words from the vocabulary, lengths uniform in [lo, hi] words (MS MARCO passages: ~56 words)."""
    words = [w for w in tokenizer.get_vocab() if w.isalpha() and len(w) > 2]
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(lo, hi))) for _ in range(n)]


def encode_throughput(results: dict) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from benchmark.splade import encode

    tokenizer = AutoTokenizer.from_pretrained(Path(os.environ["BENCHMARK_MODEL_DIR"]) / "bert-tiny")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).eval().cuda()  # bert-base-uncased's shape: 110M parameters
    docs = synthetic_texts(tokenizer, 40_000, 20, 100)
    # Sparsify like a trained model: shift the vocabulary bias until docs have ~200 non-zeros.
    bias = model.cls.predictions.decoder.bias if model.cls.predictions.decoder.bias is not None else model.cls.predictions.bias
    for shift in (0.0, 1.0, 1.5, 2.0, 2.5, 3.0):
        with torch.no_grad():
            bias.fill_(-shift)
        nnz = sum(len(i) for i, _ in encode(model, tokenizer, docs[:256], max_length=256, batch_size=128)) / 256
        results.setdefault("calibration", []).append({"bias": -shift, "doc_nnz": nnz})
        if nnz < 300:
            break
    for dtype in (torch.bfloat16, torch.float32):
        m = model.to(dtype)
        encode(m, tokenizer, docs[:2048], max_length=256, batch_size=256)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        reps = encode(m, tokenizer, docs, max_length=256, batch_size=256)
        torch.cuda.synchronize()
        secs = time.perf_counter() - start
        rate = len(docs) / secs
        results[f"encode_{str(dtype).split('.')[-1]}"] = {
            "docs": len(docs), "seconds": round(secs, 2), "docs_per_s": round(rate),
            "doc_nnz": round(sum(len(i) for i, _ in reps) / len(reps), 1),
            "msmarco_minutes": round(MSMARCO_PASSAGES / rate / 60, 1),
            "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20),
        }


def train_steps(results: dict) -> None:
    import torch

    from _tiny_models import tiny_modernbert
    from benchmark.train import load_recipe, train_splade

    with tempfile.TemporaryDirectory() as tmp:
        init = tiny_modernbert(Path(tmp), vocab_size=50368)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(init)
        texts = synthetic_texts(tok, 3 * 640, 5, 60, seed=1)
        examples = [{"query": texts[i][:60], "positive": texts[i + 640], "negative": texts[i + 1280]} for i in range(640)]
        torch.cuda.reset_peak_memory_stats()
        record = train_splade(init, examples, load_recipe("smoke"), Path(tmp) / "out", progress=False,
                              overrides={"max_steps": 20, "batch_size": 32, "logging_steps": 5, "save_steps": 100})
        keep = ("status", "collapse_reason", "steps", "precision", "steps_per_second", "examples_per_second",
                "final_loss", "final_nnz_q", "final_nnz_d", "head_norm_initial", "head_norm_final")
        results["train_tiny_modernbert_bf16"] = {k: record.get(k) for k in keep}
        results["train_tiny_modernbert_bf16"]["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)


def main() -> int:
    import torch

    results: dict = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    for name, check in (("encode", encode_throughput), ("train", train_steps)):
        try:
            check(results)
        except Exception as exc:  # report what ran; one failing check must not hide the other
            results[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    text = json.dumps(results, indent=2)
    print(text)
    out = os.environ.get("OUT")
    if out:
        Path(out, "gpu_check.json").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
