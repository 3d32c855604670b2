"""MLM-head diagnostics: the match statistics, what a rescaling method changed, SPLADE at initialisation.

The collapse the rescaling fixes is visible before any training: large logits make
``log(1+relu(·))`` large over much of the vocabulary for every text. This module measures, on the
shipped SciFact sample, the three match statistics before and after rescaling, what the method
did to the model (parameters, tie, how far the encoder's hidden states and the logits moved), and
SPLADE's activity at initialisation.

    python -m benchmark.model.head_diagnostics --backbones bert-tiny modernbert-base --rescale 0.25 \
        --method once projection head-norm tied untie
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchmark.common.atomic import save_figure, write_text

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchmark.model.rescale import Rescale

# Keyword-style queries, as in retrieval collections (documents: the shipped SciFact abstracts).
SAMPLE_QUERIES: tuple[str, ...] = (
    "capital of france",
    "how do vaccines work",
    "largest planet",
    "insulin blood sugar",
    "causes of sea level rise",
    "python syntax",
)

COLUMNS: tuple[str, ...] = (
    "backbone",
    "rescale",
    "method",
    "factor",
    "model_type",
    "vocab_size",
    "hidden_size",
    "tied_before",
    "tied",
    "params_before",
    "params",
    "frobenius_before",
    "frobenius",
    "row_rms_before",
    "row_rms",
    "logit_std_before",
    "logit_std",
    "head_gain_before",
    "head_gain",
    "bias_norm",
    "embedding_norm_before",
    "embedding_norm",
    "logit_scale",
    "logit_dev",
    "hidden_drift",
    "logit_mean",
    "logit_max",
    "act_mean",
    "doc_nnz",
    "query_nnz",
    "doc_flops",
)


# logit_dev compares logits on the first batch's first real tokens (float64: 256 × 50k vocab ≈ 100 MB).
FIRST_TOKENS = 256


def head_stats(model: PreTrainedModel) -> dict[str, Any]:
    """Weights of the MLM head: parameters, tie, ‖αW‖_F, row RMS, rms(γ) of the head LayerNorm, bias and embedding
    norms."""
    from benchmark.model.rescale import STATISTICS, head_snapshot

    snap = head_snapshot(model)
    return {
        "tied": snap["tied"],
        "params": snap["params"],
        "frobenius": snap["projection_norm"],  # ‖αW‖_F: the projection as the logits see it (α of 'projection')
        "row_rms": STATISTICS["row-rms"].measure(model, None),
        "head_gain": snap["head_gain"],
        "bias_norm": snap["bias_norm"],
        "embedding_norm": snap["embedding_norm"],
    }


def splade_logits(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int = 128
) -> tuple[torch.Tensor, torch.Tensor]:
    """MLM logits [batch, tokens, vocab] and the attention mask [batch, tokens] for ``texts``."""
    import torch

    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.inference_mode():
        logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
    return logits.float(), enc["attention_mask"]


def splade_reps(logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """SPLADE max pooling: w_j = max_t log(1 + relu(logit_tj)) over non-padding tokens t."""
    import torch

    weights = torch.log1p(torch.relu(logits)) * attention_mask.unsqueeze(-1).to(logits.dtype)
    return weights.amax(dim=1)


def sample_pass(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None
) -> dict[str, Any]:
    """One pass over the document sample (default: the shipped SciFact abstracts).

    Returns logit_std (as the match statistic defines it), logit_mean/max over real tokens, the
    SPLADE document statistics (act_mean: mean weight over the vocabulary; doc_nnz: non-zeros per
    document; doc_flops: sum_j (mean_i w_ij)^2), and for drift checks the encoder's output at every
    real token (``hidden``) and the logits of the first FIRST_TOKENS real tokens (``first_logits``).
    """
    import torch

    from benchmark.model.rescale import sample_logits, token_logit_std

    captured: list[torch.Tensor] = []
    hook = model.base_model.register_forward_hook(lambda module, args, out: captured.append(out[0]))
    std_sum, tokens, logit_sum, logit_max = 0.0, 0, 0.0, -float("inf")
    docs, act_sum, nnz_sum, col_sum = 0, 0.0, 0.0, None
    hidden: list[torch.Tensor] = []
    first_logits = None
    try:
        for logits, mask in sample_logits(model, tokenizer, texts):
            real = mask.bool()
            s, n = token_logit_std(logits, mask)
            std_sum, tokens = std_sum + s, tokens + n
            token_logits = logits[real]
            logit_sum += float(token_logits.double().sum())
            logit_max = max(logit_max, float(token_logits.max()))
            reps = splade_reps(logits.float(), mask).double()
            docs += reps.shape[0]
            act_sum += float(reps.mean(dim=1).sum())
            nnz_sum += float((reps > 0).sum())
            col_sum = reps.sum(dim=0) if col_sum is None else col_sum + reps.sum(dim=0)
            hidden.append(captured.pop()[real].double())
            if first_logits is None:
                first_logits = token_logits[:FIRST_TOKENS].double()
    finally:
        hook.remove()
    vocab = first_logits.shape[1]  # type: ignore[union-attr]
    return {
        "logit_std": std_sum / tokens,
        "logit_mean": logit_sum / (tokens * vocab),
        "logit_max": logit_max,
        "act_mean": act_sum / docs,
        "doc_nnz": nnz_sum / docs,
        "doc_flops": float(((cast("torch.Tensor", col_sum) / docs) ** 2).sum()),  # the sample is not empty
        "hidden": torch.cat(hidden),
        "first_logits": first_logits,
    }


def query_nnz(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, queries: Sequence[str] = SAMPLE_QUERIES
) -> float:
    """Mean non-zeros per SPLADE query vector."""
    reps = splade_reps(*splade_logits(model, tokenizer, queries))
    return float((reps > 0).sum(dim=1).double().mean())


SCALARS = ("logit_std", "logit_mean", "logit_max", "act_mean", "doc_nnz", "doc_flops")


def splade_stats(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    documents: Sequence[str] | None = None,
    queries: Sequence[str] = SAMPLE_QUERIES,
) -> dict[str, float]:
    """Logit scale and SPLADE sparsity at initialisation on the document sample and ``queries``."""
    out = sample_pass(model, tokenizer, documents)
    return {**{k: out[k] for k in SCALARS}, "query_nnz": query_nnz(model, tokenizer, queries)}


def _relative(new: torch.Tensor, old: torch.Tensor) -> float:
    """‖new − old‖_F / ‖old‖_F in float64 (0.0 when both are 0)."""
    import torch

    denom = float(torch.linalg.norm(old))
    return float(torch.linalg.norm(new - old)) / denom if denom else 0.0


def diagnose(name: str, spec: Rescale, texts: Sequence[str] | None = None) -> dict[str, Any]:
    """Load backbone ``name``, measure, rescale per ``spec``, measure again: one row of COLUMNS.

    logit_scale = logit_std after / before (α for head-norm and untie); logit_dev = ‖z' − αz‖/‖αz‖
    over the first FIRST_TOKENS sample tokens; hidden_drift = ‖h' − h‖/‖h‖ over the encoder's output at every
    sample token (0 unless the method moved the encoder's input: ``tied`` on a tied head).
    """
    from benchmark.model.loader import backbone_key, load_backbone
    from benchmark.model.rescale import apply_rescale

    model, tokenizer = load_backbone(name)
    weights_before = head_stats(model)
    before = sample_pass(model, tokenizer, texts)
    record = apply_rescale(model, spec, tokenizer)
    weights_after = head_stats(model)
    after = sample_pass(model, tokenizer, texts)
    factor = record["factor"]
    row: dict[str, Any] = {
        "backbone": backbone_key(name),
        "rescale": spec.label,
        "method": spec.method,
        "factor": factor,
        "model_type": model.config.model_type,
        "vocab_size": int(model.config.vocab_size),
        "hidden_size": int(model.config.hidden_size),
        **{f"{k}_before": v for k, v in weights_before.items()},
        **weights_after,
        "logit_std_before": before["logit_std"],
        **{k: after[k] for k in SCALARS},
        "query_nnz": query_nnz(model, tokenizer),
        "logit_scale": after["logit_std"] / before["logit_std"],
        "logit_dev": _relative(after["first_logits"], before["first_logits"] * factor),
        "hidden_drift": _relative(after["hidden"], before["hidden"]),
    }
    return {c: row[c] for c in COLUMNS}


def _cell(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text with full-precision floats (so ratios can be checked exactly)."""
    from benchmark.common.atomic import csv_text

    return csv_text(({c: _cell(row[c]) for c in COLUMNS} for row in rows), COLUMNS)


def to_table(rows: list[dict[str, Any]]) -> str:
    """Aligned plain-text table, floats to 4 significant digits."""
    cells = [list(COLUMNS)] + [
        [f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.rjust(w) if j else v.ljust(w) for j, (v, w) in enumerate(zip(r, widths))) for r in cells]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Bar charts: logit-std before/after, and the mean document activation, per row (atomic write)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['backbone']}\n{r['rescale']}" for r in rows]
    xs = range(len(rows))
    fig, (ax_std, ax_act) = plt.subplots(1, 2, figsize=(max(8.0, 1.6 * len(rows) + 4), 4.0))
    ax_std.bar([x - 0.2 for x in xs], [r["logit_std_before"] for r in rows], width=0.4, label="before")
    ax_std.bar([x + 0.2 for x in xs], [r["logit_std"] for r in rows], width=0.4, label="after")
    ax_std.set_ylabel("logit std over the vocabulary")
    ax_std.set_title("MLM logit scale (SciFact sample)")
    ax_std.legend()
    ax_act.bar(list(xs), [r["act_mean"] for r in rows], width=0.6, color="tab:green")
    ax_act.set_ylabel("mean SPLADE weight per vocabulary entry")
    ax_act.set_title("SPLADE activity at initialisation")
    for ax in (ax_std, ax_act):
        ax.set_xticks(list(xs), labels, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    """The same spellings as ``benchmark.run``: ``--backbones a,b`` (or ``a b``), ``--rescale-factor``,
    ``--rescale-method``; the older ``--rescale`` and ``--method`` stay as aliases."""
    import os

    from benchmark.common.command_line import parser as make_parser

    parser = make_parser("python -m benchmark.model.head_diagnostics", __doc__.splitlines()[0])
    parser.add_argument(
        "--backbones",
        nargs="+",
        required=True,
        metavar="BACKBONE",
        help="backbone keys, hub ids or folders, comma-separated or as several words (required)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--rescale-factor",
        "--rescale",
        type=float,
        metavar="FACTOR",
        dest="rescale",
        help="multiply the MLM logits by FACTOR (default: no rescaling, unless --match-norm)",
    )
    group.add_argument(
        "--match-norm",
        metavar="REF_OR_NUMBER",
        help="rescale so the match statistic equals a "
        "reference backbone's or a number (default: no rescaling, unless --rescale-factor)",
    )
    parser.add_argument(
        "--rescale-method",
        "--method",
        nargs="+",
        default=None,
        metavar="METHOD",
        dest="method",
        help="rescaling method(s), comma-separated or as several words: once (the paper's), "
        "projection, head-norm, tied, untie (this harness's extensions); one row per backbone and method "
        "(default: once)",
    )
    parser.add_argument(
        "--match-stat",
        default=None,
        metavar="STAT",
        help="statistic for --match-norm: logit-std, row-rms, frobenius (default: logit-std)",
    )
    parser.add_argument("--keep-bias", action="store_true", help="do not scale the decoder bias")
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="measure on the first N shipped abstracts only (default: all, as the logit-std statistic does)",
    )
    parser.add_argument("--format", choices=("table", "csv"), default="table", help="stdout format")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=Path(os.environ.get("BENCHMARK_RESULTS_DIR", "results")),
        help="writes norms/norms.csv and norms/norms.png under it ($BENCHMARK_RESULTS_DIR)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.command_line import split_list

    args = build_parser().parse_args(argv)
    args.backbones, args.method = split_list(args.backbones), split_list(args.method)
    from benchmark.common.errors import BenchmarkError
    from benchmark.data.samples import scifact_abstracts
    from benchmark.model.loader import resolve_backbone
    from benchmark.model.rescale import DEFAULT_MATCH_STAT, DEFAULT_METHOD, Rescale

    try:
        specs = [
            Rescale.from_options(
                factor=args.rescale,
                match=args.match_norm,
                scale_bias=not args.keep_bias,
                method=method,
                match_stat=args.match_stat or DEFAULT_MATCH_STAT,
            )
            for method in args.method or [DEFAULT_METHOD]
        ]
        sample = scifact_abstracts()
        if args.sample is not None and not 1 <= args.sample <= len(sample):
            raise BenchmarkError(
                f"--sample must be between 1 and {len(sample)} (the shipped abstracts), got {args.sample}"
            )
        texts = sample[: args.sample] if args.sample is not None else None
        for name in args.backbones:
            resolve_backbone(name)  # every name is valid before any model loads
        # 'once' on a head tied to summed embeddings (BERT) runs as 'untie', as the planner does it
        rows = [
            diagnose(name, spec.canonical_for(name) if spec.mode != "none" else spec, texts)
            for name in args.backbones
            for spec in specs
        ]
        out = args.results_dir / "norms"
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "norms.csv", to_csv(rows))
        plot(rows, out / "norms.png")
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(to_csv(rows) if args.format == "csv" else to_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
