"""``python -m benchmark.perf rescale-study``: which match statistic to default to, and what each method does to a
backbone.

Part ``match``: which match statistic predicts what SPLADE's activations do at initialisation?

Backbones of several families, vocabulary and hidden sizes and head-LayerNorm gains (the real
bert-tiny, and random-weight BERT / ModernBERT / Ettin-like configs at tiny size) are each matched to
bert-tiny by one statistic (α = statistic(bert-tiny) / statistic(model), applied as an exact α × on the
logits, as ``head-norm`` does). A statistic that captures what SPLADE sees leaves the matched models
with the same SPLADE activations on the shipped SciFact sample; the spread that remains is its error.

SPLADE's document weight is w_j = max_t log(1 + relu(α·z_tj)) = log(1 + α·m_j) with
m_j = max_t relu(z_tj), so one pass per model gives the activations for every α.

Part ``norms``: every method at α ∈ {0.25, 4} on bert-tiny and tiny random ModernBERT / Ettin-like
configs, through ``benchmark.model.head_diagnostics.diagnose`` (parameters, tie, the three statistics before/after,
the logit scale check, and the drift of the encoder's hidden states).

    python -m benchmark.perf rescale-study {match,norms,all} [--sample N] [--out results/rescale-study]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.atomic import write_text
from benchmark.data.samples import scifact_abstracts
from benchmark.model.head_diagnostics import diagnose
from benchmark.model.heads import mlm_head
from benchmark.model.loader import load_backbone, resolve_backbone
from benchmark.model.rescale import METHODS, Rescale, measure, sample_logits, token_logit_std
from benchmark.model.synthetic import save_random_mlm

if TYPE_CHECKING:
    import torch

STATS = ("frobenius", "row-rms", "logit-std")


def random_mlm(root: Path, name: str, family: str, vocab: int, hidden: int, seed: int = 0, init: float = 0.02) -> Path:
    """A random ``*ForMaskedLM`` (2 layers) with a WordPiece tokenizer of ``vocab`` tokens."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, ModernBertConfig, ModernBertForMaskedLM

    path = root / name
    heads = max(2, hidden // 64)
    if family == "bert":
        config = BertConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=2,
            num_attention_heads=heads,
            intermediate_size=2 * hidden,
            max_position_embeddings=512,
            initializer_range=init,
        )
        cls = BertForMaskedLM
    else:
        config = ModernBertConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=int(1.5 * hidden),
            num_hidden_layers=2,
            num_attention_heads=heads,
            max_position_embeddings=512,
            local_attention=64,
            pad_token_id=0,
            bos_token_id=101,
            cls_token_id=101,
            eos_token_id=102,
            sep_token_id=102,
            initializer_range=init,
        )
        cls = ModernBertForMaskedLM
    torch.manual_seed(seed)
    return save_random_mlm(cls(config), path)


def models(root: Path, limit: int | None = None) -> list[tuple[str, str, float]]:
    """(label, backbone path, head-gain multiplier) for the study's backbones (the first ``limit``; built as listed)."""
    bert_tiny = resolve_backbone("bert-tiny")
    specs = [
        ("bert-tiny (pretrained)", lambda: bert_tiny, 1.0),
        ("bert-tiny, head gain x0.5", lambda: bert_tiny, 0.5),
        ("BERT V30522 H32", lambda: random_mlm(root, "bert-32", "bert", 30522, 32), 1.0),
        ("BERT V30522 H128 gain 4", lambda: random_mlm(root, "bert-128", "bert", 30522, 128, seed=1), 4.0),
        ("ModernBERT V50368 H64", lambda: random_mlm(root, "mb-64", "modernbert", 50368, 64), 1.0),
        ("Ettin-like V50368 H256", lambda: random_mlm(root, "ettin-256", "modernbert", 50368, 256, seed=2), 1.0),
        ("Ettin-like V50368 H128 gain 6", lambda: random_mlm(root, "ettin-128", "modernbert", 50368, 128, seed=3), 6.0),
        ("Ettin-like V8192 H128", lambda: random_mlm(root, "ettin-v8k", "modernbert", 8192, 128, seed=4), 1.0),
        ("Ettin-like V50368 H64 gain 0.5", lambda: random_mlm(root, "ettin-64", "modernbert", 50368, 64, seed=5), 0.5),
        (
            "Ettin-like V50368 H128 init 0.05",
            lambda: random_mlm(root, "ettin-init", "modernbert", 50368, 128, seed=6, init=0.05),
            1.0,
        ),
    ]
    return [(label, str(build()), gain) for label, build, gain in specs[:limit]]


def measure_model(path: str, gain: float, texts: Sequence[str] | None) -> dict[str, Any]:
    """The three statistics and the per-document max positive logits m [docs, vocab] of one backbone."""
    import torch

    model, tokenizer = load_backbone(path)
    if gain != 1.0:
        norm = mlm_head(model).norm
        with torch.no_grad():  # a pretrained-like head gain (bias too, so it is an exact logit scale of W·y)
            norm.weight.mul_(gain)
            if norm.bias is not None:
                norm.bias.mul_(gain)
    stats = {s: measure(s, model) for s in ("frobenius", "row-rms")}
    total, count, maxima = 0.0, 0, []
    for logits, mask in sample_logits(model, tokenizer, texts):
        s, n = token_logit_std(logits, mask)
        total, count = total + s, count + n
        maxima.append((torch.relu(logits) * mask.unsqueeze(-1)).amax(dim=1))
    stats["logit-std"] = total / count
    return {
        "stats": stats,
        "m": torch.cat(maxima),
        "vocab": int(model.config.vocab_size),
        "hidden": int(model.config.hidden_size),
        "gain": float(mlm_head(model).norm.weight.detach().double().pow(2).mean().sqrt()),
    }


def activations(m: torch.Tensor, alpha: float) -> dict[str, float]:
    """SPLADE at initialisation with logits × α: mean weight of the active entries, mean of each
    document's largest weight, non-zeros per document (α-independent: the support does not move)."""
    import torch

    w = torch.log1p(alpha * m.double())
    active = m > 0
    return {
        "active_weight": float(w[active].mean()),
        "max_weight": float(w.amax(dim=1).mean()),
        "nnz": float(active.sum(dim=1).double().mean()),
    }


def spread(values: list[float]) -> tuple[float, float]:
    """(max/min ratio, std of log values): 1 and 0 when every model gets the same value."""
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return max(values) / min(values), math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))


def pearson(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return cov / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def match_part(texts: Sequence[str] | None, sample: int | None, limit: int | None = None) -> str:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, path, gain in models(Path(tmp), limit):
            print(f"measuring {label}", file=sys.stderr, flush=True)
            rows.append({"label": label, **measure_model(path, gain, texts)})
    ref = rows[0]
    lines = [
        "# Match statistics vs SPLADE activations at initialisation",
        "",
        f"Sample: {'all 256' if not sample else f'first {sample}'} shipped SciFact abstracts, ≤ 128 tokens.",
        "Reference: bert-tiny (pretrained). α = stat(ref) / stat(model), applied exactly to the logits.",
        "",
        "## Backbones",
        "",
        "| backbone | vocab | hidden | rms(γ) | frobenius | row-rms | logit-std | nnz/doc | active weight (α=1) "
        "| α frobenius | α row-rms | α logit-std |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a = activations(r["m"], 1.0)
        st = r["stats"]
        alphas = " | ".join(f"{ref['stats'][s] / st[s]:.3g}" for s in STATS)
        lines.append(
            f"| {r['label']} | {r['vocab']} | {r['hidden']} | {r['gain']:.3g} | {st['frobenius']:.4g} | "
            f"{st['row-rms']:.4g} | "
            f"{st['logit-std']:.4g} | {a['nnz']:.0f} | {a['active_weight']:.4g} | {alphas} |"
        )
    lines += [
        "",
        "## Spread of SPLADE activations after matching to bert-tiny (lower is better)",
        "",
        "max/min ratio over the backbones, and the std of the log (in parentheses).",
        "",
        "| matched by | mean active weight | mean max weight per doc | corr(log stat, log active weight), unmatched |",
        "|---|---:|---:|---:|",
    ]
    base = [activations(r["m"], 1.0) for r in rows]
    for stat in ("none", *STATS):
        acts = []
        for r in rows:
            alpha = 1.0 if stat == "none" else ref["stats"][stat] / r["stats"][stat]
            acts.append(activations(r["m"], alpha))
        cells = []
        for key in ("active_weight", "max_weight"):
            ratio, sd = spread([a[key] for a in acts])
            cells.append(f"{ratio:.3g} ({sd:.3g})")
        corr = (
            ""
            if stat == "none"
            else f"{pearson([math.log(r['stats'][stat]) for r in rows], [math.log(a['active_weight']) for a in base]):.3f}"  # noqa: E501
        )
        lines.append(f"| {stat} | {' | '.join(cells)} | {corr} |")
    return "\n".join(lines) + "\n"


def norms_part(texts: Sequence[str] | None, sample: int | None, limit: int | None = None) -> str:
    lines = [
        "# Rescaling methods on bert-tiny and tiny ModernBERT / Ettin-like configs",
        "",
        f"Sample: {'all 256' if not sample else f'first {sample}'} shipped SciFact abstracts, ≤ 128 tokens. "
        "logit_dev = ‖z′ − αz‖/‖αz‖ on the first 256 tokens; drift = ‖h′ − h‖/‖h‖ of the encoder output.",
        "",
        "| backbone | method | α | params | tied | frobenius | row-rms | logit-std | rms(γ) | logit-std ratio | "
        "logit_dev | hidden drift |",
        "|---|---|---:|---|---|---|---|---|---|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        backbones = [
            ("bert-tiny", lambda: resolve_backbone("bert-tiny")),
            ("ModernBERT V50368 H64", lambda: random_mlm(Path(tmp), "mb-64", "modernbert", 50368, 64)),
            ("Ettin-like V50368 H256", lambda: random_mlm(Path(tmp), "ettin-256", "modernbert", 50368, 256, seed=2)),
        ]
        for label, build in backbones[:limit]:
            path = str(build())
            for alpha in (0.25, 4.0):
                for method in METHODS:
                    print(f"norms {label} {method} x{alpha:g}", file=sys.stderr, flush=True)
                    spec = Rescale("factor", factor=alpha, method=method).canonical_for(path)  # BERT: once → untie
                    r = diagnose(path, spec, texts)
                    pair = lambda k, f="{:.4g}": f"{f.format(r[k + '_before'])} → {f.format(r[k])}"  # noqa: E731, B023  (used in this iteration only)
                    shown = method if spec.method == method else f"{method} (as {spec.method})"
                    lines.append(
                        f"| {label} | {shown} | {alpha:g} | {r['params_before']:,} → {r['params']:,} | "
                        f"{r['tied_before']} → {r['tied']} "
                        f"| {pair('frobenius')} | {pair('row_rms')} | {pair('logit_std')} | {pair('head_gain')} "
                        f"| {r['logit_scale']:.6g} | {r['logit_dev']:.3g} | {r['hidden_drift']:.3g} |"
                    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmark.perf rescale-study", description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("match", "norms", "all"))
    parser.add_argument("--sample", type=int, help="first N shipped abstracts (default: all)")
    parser.add_argument("--models", type=int, help="the first N backbones of each part (default: all; a quick check)")
    parser.add_argument("--out", type=Path, default=Path("results") / "rescale-study")
    args = parser.parse_args(argv)
    for flag in ("sample", "models"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            print(f"error: --{flag} must be a positive integer, got {getattr(args, flag)}", file=sys.stderr)
            return 2

    texts = scifact_abstracts()[: args.sample] if args.sample else None
    args.out.mkdir(parents=True, exist_ok=True)
    for part, run in (("match", match_part), ("norms", norms_part)):
        if args.part in (part, "all"):
            text = run(texts, args.sample, args.models)
            write_text(args.out / f"{part}.md", text)
            sys.stdout.write(text)
    return 0
