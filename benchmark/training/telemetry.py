"""Training telemetry (one row per logging step) and the collapse detector that reads it.

Rows live in the Trainer's ``state.log_history``, which every checkpoint stores, so a resumed
run continues the same table. Collapse is a result, not an error: the detector only names the
step and the reason; training then stops and the collapsed model is saved like any other.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.atomic import save_figure, write_text

#: CSV columns, in order. Loss parts: ``loss = ranking_loss + lambda_q·flops_reg_q + lambda_d·flops_reg_d``.
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
    "flops",  # sum_j P(q_j>0)·P(d_j>0), the retrieval cost the regulariser relaxes
    "nnz_q",  # mean non-zeros per query / document vector
    "nnz_d",
    "max_q",  # largest activation
    "max_d",
    "head_norm",  # Frobenius norm of the MLM vocabulary projection
    "grad_norm",  # global gradient norm before clipping
    "learning_rate",
)

#: collapse reason codes
NAN = "nan_loss"
ZERO = "zero_representations"
DENSE = "dense_representations"


@dataclass
class CollapseDetector:
    """Names the first sign of collapse: a non-finite loss, all-zero query or document vectors,
    or vectors denser than ``dense_fraction`` of the vocabulary for ``dense_patience``
    consecutive logging steps."""

    vocab_size: int
    dense_fraction: float
    dense_patience: int
    dense_run: int = 0
    step: int | None = None
    reason: str | None = None
    detail: str | None = None

    def _trip(self, step: int, reason: str, detail: str) -> str:
        if self.reason is None:
            self.step, self.reason, self.detail = step, reason, detail
        return self.reason

    def check_finite(self, step: int, finite: bool) -> str | None:
        """Per optimiser step: a NaN/inf loss or vector ends training at once."""
        if not finite:
            return self._trip(step, NAN, f"non-finite loss or representation at step {step}")
        return self.reason

    def check_row(self, row: dict[str, Any]) -> str | None:
        """Per logging step, on a telemetry row."""
        step = int(row["step"])
        values = [row.get(k) for k in ("loss", "ranking_loss", "nnz_q", "nnz_d")]
        if any(v is not None and not math.isfinite(v) for v in values):
            return self._trip(step, NAN, f"non-finite loss at step {step} (loss={row.get('loss')})")
        for side, name in (("q", "query"), ("d", "document")):
            if row.get(f"nnz_{side}") == 0:
                return self._trip(step, ZERO, f"every {name} vector is all-zero at step {step}")
        density = max(row.get("nnz_q") or 0.0, row.get("nnz_d") or 0.0) / self.vocab_size
        self.dense_run = self.dense_run + 1 if density > self.dense_fraction else 0
        if self.dense_run >= self.dense_patience:
            return self._trip(
                step,
                DENSE,
                f"vectors denser than {self.dense_fraction:g} of the vocabulary for {self.dense_run} logging steps "
                f"(step {step}: nnz_q={row.get('nnz_q'):.1f}, nnz_d={row.get('nnz_d'):.1f} of {self.vocab_size})",
            )
        return self.reason

    def replay(self, rows: Iterable[dict[str, Any]]) -> None:
        """Rebuild the consecutive-dense count from earlier rows (on resume)."""
        for row in rows:
            self.check_row(row)


def telemetry_rows(log_history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The telemetry rows among a Trainer's log entries (those this module wrote)."""
    return [entry for entry in log_history if "ranking_loss" in entry and "nnz_d" in entry]


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
    "FLOPS": (("flops",), True),
    "non-zeros per vector": (("nnz_q", "nnz_d"), True),
    "max activation": (("max_q", "max_d"), False),
    "MLM-head norm": (("head_norm",), False),
    "gradient norm": (("grad_norm",), True),
}


def plot_png(rows: Sequence[dict[str, Any]], path: Path, title: str = "", collapse_step: int | None = None) -> None:
    """One panel per quantity against the step; a red line marks the collapse step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(16, 7), constrained_layout=True)
    steps = [r["step"] for r in rows]
    for ax, (name, (columns, log)) in zip(axes.flat, PANELS.items()):
        for column in columns:
            values = [r.get(column, math.nan) for r in rows]
            values = [v if isinstance(v, (int, float)) else math.nan for v in values]
            ax.plot(steps, values, marker=".", label=column)
        if log and any(isinstance(v, (int, float)) and v > 0 for r in rows for v in (r.get(c) for c in columns)):
            ax.set_yscale("log")
        else:
            ax.ticklabel_format(axis="y", useOffset=False)  # show the head norm itself, not +1.2e2
        if collapse_step is not None:
            ax.axvline(collapse_step, color="red", linestyle="--", linewidth=1)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save_figure(fig, path, dpi=80)
    plt.close(fig)
