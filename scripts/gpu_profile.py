"""GPU encode profile (issue 6): where the time goes, and MS MARCO extrapolations (README, Performance).

A BERT-base-shaped encoder from its config (random weights, decoder bias shifted so documents keep
~200 non-zeros as a trained SPLADE does), on synthetic passages of 20-100 words:

1. tokenisation; then per part at batch 1024: forward, blocked head + max-pool, device-side
   extraction (``splade._sparse_rows``), with widths padded as ``encode`` pads them;
2. ``splade.encode`` first pass (every padded width new) and second pass, batch 256 and 1024;
3. the ``encode`` stage (``encode_docs_stage``: shards of 5000, writer processes) end to end.

Usage on a GPU box: BENCHMARK_MODEL_DIR=<folder with bert-tiny/> python scripts/gpu_profile.py [n_docs]
Prints one JSON object, also written to $OUT/gpu_profile.json when OUT is set.
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
sys.path[:0] = [str(ROOT)]
MSMARCO_PASSAGES = 8_841_823


def main() -> int:
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from benchmark import splade
    from benchmark.encode import encode_docs_stage

    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # CPU: a dry run of the script
    tok = AutoTokenizer.from_pretrained(Path(os.environ["BENCHMARK_MODEL_DIR"]) / "bert-tiny")
    words = [w for w in tok.get_vocab() if w.isalpha() and len(w) > 2]
    rng = random.Random(0)
    docs = [" ".join(rng.choices(words, k=rng.randint(20, 100))) for _ in range(n_docs)]
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).eval().to(device)
    decoder = model.get_output_embeddings()
    with torch.no_grad():
        decoder.bias.fill_(-2.0)
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "none (CPU dry run)"
    out: dict = {"gpu": gpu, "torch": torch.__version__, "docs": n_docs, "attention": model.config._attn_implementation}

    def sync() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    t = time.perf_counter()
    tokens = splade.tokenize(tok, docs, 256).ids
    out["tokenize_s"] = round(time.perf_counter() - t, 2)
    order = np.argsort(-np.array([len(x) for x in tokens]), kind="stable")
    multiple = splade.WIDTH_MULTIPLE.get(device.type, 1)
    weight, bias = decoder.weight.detach().to(torch.bfloat16), decoder.bias.detach()
    hook = decoder.register_forward_pre_hook(splade._capture)
    parts = {"forward_s": 0.0, "head_pool_s": 0.0, "extract_s": 0.0}
    try:
        for sweep in ("warm-up", "timed"):
            with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16):
                for s in range(0, n_docs, 1024):
                    ids, mask = splade._pad(tokens, order[s : s + 1024], 0, device, multiple)
                    t0 = sync()
                    try:
                        model(input_ids=ids, attention_mask=mask)
                    except splade._Captured as captured:
                        hidden = captured.hidden
                    t1 = sync()
                    pooled = splade._pool_decoder(hidden, mask, weight, bias)
                    t2 = sync()
                    splade._sparse_rows(pooled)
                    t3 = sync()
                    if sweep == "timed":
                        parts["forward_s"] += t1 - t0
                        parts["head_pool_s"] += t2 - t1
                        parts["extract_s"] += t3 - t2
    finally:
        hook.remove()
    out["parts_batch1024"] = {k: round(v, 2) for k, v in parts.items()}

    for batch in (256, 1024):
        for attempt in ("first", "second"):
            t0 = sync()
            reps = splade.encode(model, tok, docs, max_length=256, batch_size=batch, precision="bfloat16")
            secs = sync() - t0
            out[f"encode_bs{batch}_{attempt}"] = {
                "seconds": round(secs, 2), "docs_per_s": round(n_docs / secs),
                "msmarco_minutes": round(MSMARCO_PASSAGES / (n_docs / secs) / 60, 1),
                "doc_nnz": round(sum(len(i) for i, _ in reps) / n_docs, 1)}

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(Path(tmp) / "model")
        tok.save_pretrained(Path(tmp) / "model")
        (Path(tmp) / "data" / "corpus").mkdir(parents=True)
        with open(Path(tmp) / "data" / "corpus" / "docs.jsonl", "w") as fh:
            fh.writelines(json.dumps({"id": str(i), "contents": d}) + "\n" for i, d in enumerate(docs))
        t0 = time.perf_counter()
        encode_docs_stage(Path(tmp) / "model", Path(tmp) / "data", Path(tmp) / "enc", max_length=256,
                          batch_size=1024, shard_size=5000, scale=100, precision="bfloat16", progress=False)
        secs = time.perf_counter() - t0
        out["encode_stage_bs1024"] = {"seconds": round(secs, 2), "docs_per_s": round(n_docs / secs),
                                      "msmarco_minutes": round(MSMARCO_PASSAGES / (n_docs / secs) / 60, 1)}
    text = json.dumps(out, indent=2)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_profile.json").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
