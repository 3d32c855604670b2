"""Training telemetry (one row per logging step) for the CSV, the plot and the outcome rules.

Rows live in the Trainer's ``state.log_history``, which every checkpoint stores, so a resumed
run continues the same table. The outcome (``benchmark.training.detector``) is decided from these
rows; the rows carry the triggers that fired on them (``event``) and the held-out dev MRR@10.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.common.atomic import save_figure, write_text

#: CSV columns, in order. Loss parts: ``loss = ranking_loss + lambda_q·flops_reg_q + lambda_d·flops_reg_d``.
#: Non-zeros, FLOPS and support count indexed terms: impact >= 1 after quantisation.
COLUMNS = (
    "step",
    "epoch",
    "seconds",  # cumulative training time, across resumes
    "loss",
    "ranking_loss",  # InfoNCE or MarginMSE, before the FLOPS terms
    "flops_reg_q",  # FLOPS regulariser sum_j mean_i(q_ij)^2, before λ
    "flops_reg_d",
    "lambda_q",
    "lambda_d",
    "flops",  # sum_j P(q_j indexed)·P(d_j indexed), the retrieval cost the regulariser relaxes
    "nnz_q",  # mean indexed terms per query / document vector
    "nnz_d",
    "low_support_q",  # fraction of queries with <= 2 indexed terms
    "query_cosine",  # mean cosine between different queries of a batch (indexed terms)
    "r2",  # MarginMSE: R² of the student's margins against the teacher's (empty for InfoNCE)
    "max_q",  # largest activation
    "max_d",
    "head_norm",  # Frobenius norm of the MLM vocabulary projection
    "grad_norm",  # global gradient norm before clipping
    "learning_rate",
    "dev_mrr",  # held-out dev MRR@10 (every dev_steps steps, at step 0 and at the end)
    "event",  # the outcome triggers that fired on this row, ';'-separated
)


def is_training_row(entry: dict[str, Any]) -> bool:
    return "ranking_loss" in entry and "nnz_d" in entry


def telemetry_rows(log_history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The telemetry rows among a Trainer's log entries: the step-0 dev row, then one per logging step."""
    return [e for e in log_history if is_training_row(e) or (e.get("step") == 0 and "dev_mrr" in e)]


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in COLUMNS})
    write_text(path, buf.getvalue())


#: plot panels: title → (columns, log scale)
PANELS: dict[str, tuple[tuple[str, ...], bool]] = {
    "loss": (("loss", "ranking_loss"), False),
    "FLOPS regulariser (before λ)": (("flops_reg_q", "flops_reg_d"), True),
    "λ": (("lambda_q", "lambda_d"), False),
    "FLOPS (indexed)": (("flops",), True),
    "indexed terms per vector": (("nnz_q", "nnz_d"), True),
    "support (queries)": (("low_support_q", "query_cosine"), False),
    "held-out dev MRR@10": (("dev_mrr",), False),
    "max activation": (("max_q", "max_d"), False),
    "MLM-head norm": (("head_norm",), False),
    "gradient norm": (("grad_norm",), True),
}


def plot_png(
    rows: Sequence[dict[str, Any]],
    path: Path,
    title: str = "",
    outcome_step: int | None = None,
    outcome_label: str = "",
    armed_step: int | None = None,
) -> None:
    """One panel per quantity against the step; a red line marks the outcome's step (labelled with
    its reason), a grey one the first step the triggers were armed (λ final).

    A PNG already at ``path`` that carries the key of these inputs, this module's code and this
    matplotlib is what drawing would write again (Agg is deterministic), so it is kept: a rebuild of a
    results folder redraws only the plots whose data or code changed."""
    from benchmark.common.signals import uninterrupted

    key = plot_key(rows, title, outcome_step, outcome_label, armed_step)
    if png_key(path) == key:
        return
    with uninterrupted():  # a signal inside matplotlib's drawing is raised after it, not inside it
        _draw(rows, path, title, outcome_step, outcome_label, armed_step, key)


#: the PNG text chunk that holds a plot's key
KEY_CHUNK = "Telemetry-Key"


def plot_key(rows: Sequence[dict[str, Any]], *inputs: Any) -> str:
    """sha256 of the rows and labels, this module's source and the matplotlib version."""
    import hashlib
    import json

    import matplotlib

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(json.dumps([list(rows), inputs, matplotlib.__version__], sort_keys=True, default=repr).encode())
    return digest.hexdigest()


def png_key(path: Path) -> str | None:
    """The key a telemetry PNG was drawn under; None for a missing, foreign or unreadable file."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.text.get(KEY_CHUNK) if image.format == "PNG" else None
    except (OSError, SyntaxError, ValueError):  # missing, truncated or not an image
        return None


def _draw(
    rows: Sequence[dict[str, Any]],
    path: Path,
    title: str,
    outcome_step: int | None,
    outcome_label: str,
    armed_step: int | None,
    key: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # fixed margins: a constrained layout measured every tick label and took half the drawing time
    fig, axes = plt.subplots(2, 5, figsize=(20, 7))
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.08, top=0.9, wspace=0.3, hspace=0.35)
    for n, (ax, (name, (columns, log))) in enumerate(zip(axes.flat, PANELS.items())):
        for column in columns:
            points = [(r["step"], r[column]) for r in rows if isinstance(r.get(column), (int, float))]
            if points:
                ax.plot(*zip(*points), marker=".", label=column)
        if log and any(isinstance(v, (int, float)) and v > 0 for r in rows for v in (r.get(c) for c in columns)):
            ax.set_yscale("log")
        else:
            ax.ticklabel_format(axis="y", useOffset=False)  # show the head norm itself, not +1.2e2
        if armed_step is not None:
            ax.axvline(armed_step, color="grey", linestyle=":", linewidth=1)
        if outcome_step is not None:
            ax.axvline(
                outcome_step,
                color="red",
                linestyle="--",
                linewidth=1,
                label=(outcome_label or None) if n == 0 else None,
            )
        ax.set_title(name)
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save_figure(fig, path, dpi=80, metadata={KEY_CHUNK: key})
    plt.close(fig)
