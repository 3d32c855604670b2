"""MLM-head diagnostics: head/embedding norms and SPLADE activity at initialisation.

The collapse the rescaling fixes is visible before any training: a large head norm gives large
logits, so ``log(1+relu(·))`` switches on a big share of the vocabulary for every text. This
module measures both sides on a fixed text sample, optionally after rescaling.

    python -m benchmark.norms --backbones bert-tiny modernbert-base --rescale 0.25
"""

from __future__ import annotations

import argparse
import sys

from benchmark.atomic import save_figure, write_text
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchmark.rescale import Rescale

# Fixed sample: short passages and keyword-style queries, as in retrieval collections.
SAMPLE_DOCUMENTS: tuple[str, ...] = (
    "The mitochondria is the powerhouse of the cell and produces most of its chemical energy.",
    "Paris is the capital and most populous city of France, situated on the river Seine.",
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "The Great Wall of China was built over many centuries to protect against invasions.",
    "Vaccines train the immune system to recognise and fight specific pathogens.",
    "Python is a high-level programming language known for its readable syntax.",
    "The stock market fell sharply after the central bank raised interest rates.",
    "Jupiter is the largest planet in the solar system and has dozens of moons.",
    "Regular exercise lowers blood pressure and reduces the risk of heart disease.",
    "The novel follows a young sailor who is shipwrecked on a remote island.",
    "Climate change is driving rising sea levels and more frequent extreme weather.",
    "Insulin regulates blood sugar by signalling cells to absorb glucose.",
)
SAMPLE_QUERIES: tuple[str, ...] = (
    "capital of france",
    "how do vaccines work",
    "largest planet",
    "insulin blood sugar",
    "causes of sea level rise",
    "python syntax",
)

COLUMNS: tuple[str, ...] = (
    "backbone", "rescale", "factor", "model_type", "vocab_size", "hidden_size", "tied",
    "head_norm_before", "head_norm", "row_norm_mean", "row_norm_max", "bias_norm", "embedding_norm",
    "logit_mean", "logit_max", "act_mean", "doc_nnz", "query_nnz", "doc_flops",
)


def head_stats(model: PreTrainedModel) -> dict[str, Any]:
    """Norms of the MLM-head projection [vocab, hidden], its bias and the input embeddings."""
    import torch

    from benchmark.heads import mlm_head
    from benchmark.rescale import frobenius

    head = mlm_head(model)
    rows = torch.linalg.norm(head.weight.detach().double(), dim=1)
    return {
        "tied": head.tied,
        "head_norm": frobenius(head.weight),
        "row_norm_mean": float(rows.mean()),
        "row_norm_max": float(rows.max()),
        "bias_norm": frobenius(head.bias) if head.bias is not None else 0.0,
        "embedding_norm": frobenius(model.get_input_embeddings().weight),
    }


def splade_logits(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: tuple[str, ...] | list[str], max_length: int = 128
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


def splade_stats(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    documents: tuple[str, ...] = SAMPLE_DOCUMENTS,
    queries: tuple[str, ...] = SAMPLE_QUERIES,
) -> dict[str, float]:
    """Logit scale and SPLADE sparsity at initialisation on a text sample.

    logit_mean/max over real document tokens; act_mean is the mean document weight over the
    vocabulary; doc_nnz/query_nnz are non-zeros per vector; doc_flops is the FLOPS regulariser
    sum_j (mean_i w_ij)^2 over the document sample.
    """
    logits, mask = splade_logits(model, tokenizer, documents)
    token_logits = logits[mask.bool()]  # [real tokens, vocab]
    docs = splade_reps(logits, mask)
    queries_rep = splade_reps(*splade_logits(model, tokenizer, queries))
    return {
        "logit_mean": float(token_logits.double().mean()),
        "logit_max": float(token_logits.max()),
        "act_mean": float(docs.double().mean()),
        "doc_nnz": float((docs > 0).sum(dim=1).double().mean()),
        "query_nnz": float((queries_rep > 0).sum(dim=1).double().mean()),
        "doc_flops": float((docs.double().mean(dim=0) ** 2).sum()),
    }


def diagnose(name: str, spec: Rescale) -> dict[str, Any]:
    """Load backbone ``name``, rescale per ``spec``, and measure one row of COLUMNS."""
    from benchmark.backbone import backbone_key, load_backbone
    from benchmark.rescale import apply_rescale

    model, tokenizer = load_backbone(name)
    record = apply_rescale(model, spec)
    row: dict[str, Any] = {
        "backbone": backbone_key(name),
        "rescale": spec.label,
        "factor": record["factor"],
        "model_type": model.config.model_type,
        "vocab_size": int(model.config.vocab_size),
        "hidden_size": int(model.config.hidden_size),
        "head_norm_before": record["head_norm_before"],
        **head_stats(model),
        **splade_stats(model, tokenizer),
    }
    return {c: row[c] for c in COLUMNS}


def _cell(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text with full-precision floats (so ratios can be checked exactly)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(row[c]) for c in COLUMNS])
    return buf.getvalue()


def to_table(rows: list[dict[str, Any]]) -> str:
    """Aligned plain-text table, floats to 4 significant digits."""
    cells = [list(COLUMNS)] + [[f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.rjust(w) if j else v.ljust(w) for j, (v, w) in enumerate(zip(r, widths))) for r in cells]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Bar chart: head vs embedding norm, and non-zeros per document, per backbone (atomic write)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['backbone']}\n{r['rescale']}" for r in rows]
    xs = range(len(rows))
    fig, (ax_norm, ax_nnz) = plt.subplots(1, 2, figsize=(max(8.0, 1.6 * len(rows) + 4), 4.0))
    ax_norm.bar([x - 0.2 for x in xs], [r["head_norm"] for r in rows], width=0.4, label="MLM head")
    ax_norm.bar([x + 0.2 for x in xs], [r["embedding_norm"] for r in rows], width=0.4, label="input embeddings")
    ax_norm.set_ylabel("Frobenius norm")
    ax_norm.set_title("Weight norms")
    ax_norm.legend()
    ax_nnz.bar(list(xs), [r["doc_nnz"] for r in rows], width=0.6, color="tab:green")
    ax_nnz.set_ylabel("non-zeros per document")
    ax_nnz.set_title("SPLADE activity at initialisation")
    for ax in (ax_norm, ax_nnz):
        ax.set_xticks(list(xs), labels, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmark.norms", description=__doc__.splitlines()[0])
    parser.add_argument("--backbones", nargs="+", required=True, metavar="KEY", help="backbone keys, hub ids or folders")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--rescale", type=float, metavar="FACTOR", help="multiply the MLM-head projection by FACTOR")
    group.add_argument("--match-norm", metavar="REF_OR_NUMBER", help="rescale to a reference backbone's head norm or to a number")
    parser.add_argument("--keep-bias", action="store_true", help="do not scale the decoder bias with the projection")
    parser.add_argument("--format", choices=("table", "csv"), default="table", help="stdout format")
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="writes norms/norms.csv and norms/norms.png")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from benchmark.backbone import resolve_backbone
    from benchmark.errors import BenchmarkError
    from benchmark.rescale import Rescale

    try:
        spec = Rescale.from_options(factor=args.rescale, match=args.match_norm, scale_bias=not args.keep_bias)
        for name in args.backbones:
            resolve_backbone(name)  # every name is valid before any model loads
        rows = [diagnose(name, spec) for name in args.backbones]
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
