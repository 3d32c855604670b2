"""``python -m benchmark.perf budget-probe``: the GPU throughput probe behind the compute budget
(``benchmark.pipeline.budget``).

For each paper backbone, built from its published config with random weights (speed does not
depend on the weights): SPLADE document encoding through ``benchmark.splade.encoder.encode`` at fixed token
lengths, and one SPLADE training step (InfoNCE with in-batch + 1 hard negative, FLOPS, AdamW) at
the msmarco-infonce recipe's batch size. Prints one JSON line per measurement.

    python -m benchmark.perf budget-probe [--backbones ettin-17m,...] [--steps 5] [--batch 128]

On a machine without CUDA it runs on the CPU, only to try it out (the CPU smoke test does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from benchmark.common.errors import BenchmarkError
from benchmark.perf.perf_cli import positive_ints, subset
from benchmark.splade.encoder import encode

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to try the script out


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


# hidden, layers, intermediate, heads (BERT: vocab 30522; ModernBERT/Ettin: 50368)
CONFIGS = {
    "bert-base-uncased": ("bert", 768, 12, 3072, 12),
    "modernbert-base": ("modernbert", 768, 22, 1152, 12),
    "modernbert-large": ("modernbert", 1024, 28, 2624, 16),
    "ettin-17m": ("modernbert", 256, 7, 384, 4),
    "ettin-32m": ("modernbert", 384, 10, 576, 6),
    "ettin-68m": ("modernbert", 512, 19, 768, 8),
    "ettin-150m": ("modernbert", 768, 22, 1152, 12),
    "ettin-400m": ("modernbert", 1024, 28, 2624, 16),
    "ettin-1b": ("modernbert", 1792, 28, 3840, 28),
}


def build(name: str) -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM, ModernBertConfig, ModernBertForMaskedLM

    kind, hidden, layers, inter, heads = CONFIGS[name]
    if kind == "bert":
        cfg = BertConfig(
            hidden_size=hidden, num_hidden_layers=layers, intermediate_size=inter, num_attention_heads=heads
        )
        cls = BertForMaskedLM
    else:
        cfg = ModernBertConfig(
            hidden_size=hidden,
            num_hidden_layers=layers,
            intermediate_size=inter,
            num_attention_heads=heads,
            vocab_size=50368,
            reference_compile=False,
        )
        cls = ModernBertForMaskedLM
    with torch.device(DEVICE):
        model = cls(cfg)
    return model


class FakeTokenizer:
    """Text 'n' → n random token ids: fixed lengths without a tokenizer file."""

    model_input_names = ["input_ids", "attention_mask"]
    pad_token_id = 0

    def __init__(self, vocab: int) -> None:
        self.rng = np.random.default_rng(0)
        self.vocab = vocab

    def __call__(
        self, texts: Sequence[str], truncation: bool = True, max_length: int = 256, **kwargs: Any
    ) -> dict[str, list[list[int]]]:
        ids = [self.rng.integers(1000, self.vocab, size=min(int(t), max_length)).tolist() for t in texts]
        return {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]}


def encode_rate(model: Any, vocab: int, length: int, batch: int, precision: str) -> float:
    tok = FakeTokenizer(vocab)
    texts = [str(length)] * (batch * 4)
    encode(model, tok, texts[:batch], max_length=256, batch_size=batch, precision=precision)  # warm-up
    sync()
    t = time.perf_counter()
    encode(model, tok, texts, max_length=256, batch_size=batch, precision=precision)
    sync()
    return len(texts) / (time.perf_counter() - t)


def splade(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.log1p(torch.relu(logits)).masked_fill(~mask.bool().unsqueeze(-1), 0).amax(dim=1)


def train_step_seconds(model: Any, vocab: int, batch: int, q_len: int, d_len: int, steps: int) -> float:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    q = torch.randint(1000, vocab, (batch, q_len), device=DEVICE)
    d = torch.randint(1000, vocab, (2 * batch, d_len), device=DEVICE)
    qm, dm = torch.ones_like(q), torch.ones_like(d)

    def step() -> None:
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            qv = splade(model(input_ids=q, attention_mask=qm).logits, qm).float()
            dv = splade(model(input_ids=d, attention_mask=dm).logits, dm).float()
        scores = qv @ dv.T
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(batch, device=DEVICE))
        loss = loss + 3e-4 * (qv.mean(0) ** 2).sum() + 1e-4 * (dv.mean(0) ** 2).sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) / steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.perf budget-probe", description=__doc__.splitlines()[0])
    p.add_argument("--backbones", default=",".join(CONFIGS), help=f"comma-separated, of: {', '.join(CONFIGS)}")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lengths", default="64,128,256", help="token lengths of the encode measurements")
    p.add_argument("--doc-lengths", default="128,256", help="document lengths of the training steps (queries: 32)")
    args = p.parse_args(argv)
    try:
        lengths, doc_lengths = positive_ints(args.lengths, "lengths"), positive_ints(args.doc_lengths, "doc-lengths")
        names = subset(args.backbones, CONFIGS, "backbone", "backbones")
        if args.steps < 1 or args.batch < 1:
            raise BenchmarkError(f"--steps and --batch must be positive integers, got {args.steps} and {args.batch}")
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = True
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    print(json.dumps({"gpu": gpu, "torch": torch.__version__}), flush=True)
    for name in names:
        model = build(name).eval()
        vocab = model.get_output_embeddings().weight.shape[0]
        params = sum(p.numel() for p in model.parameters())
        row = {"backbone": name, "params_m": round(params / 1e6, 1)}
        for precision in ("float32", "bfloat16"):
            for length in lengths:
                try:
                    row[f"enc_{precision}_{length}"] = round(encode_rate(model, vocab, length, args.batch, precision))
                except torch.OutOfMemoryError:
                    row[f"enc_{precision}_{length}"] = "oom"
                torch.cuda.empty_cache()
        for d_len in doc_lengths:
            try:
                row[f"train_s_q32_d{d_len}"] = round(
                    train_step_seconds(model, vocab, args.batch, 32, d_len, args.steps), 3
                )
            except torch.OutOfMemoryError:
                row[f"train_s_q32_d{d_len}"] = "oom"
            torch.cuda.empty_cache()
        if DEVICE == "cuda":
            row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            torch.cuda.reset_peak_memory_stats()
        print(json.dumps(row), flush=True)
        del model
        torch.cuda.empty_cache()
    return 0
