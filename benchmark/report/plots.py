"""Plots from the table model: the scale sweep (score, FLOPS and non-zeros vs. rescale factor), the
averages (baseline vs. rescaled per backbone) and the MLM-head norms before/after rescaling."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from benchmark.atomic import save_figure
from benchmark.outcomes import COLLAPSED, OK
from benchmark.report.results import ConditionResult, SuiteResults
from benchmark.report.table import Table, is_baseline, short_name

SWEEP, AVERAGES, NORMS = "sweep.png", "averages.png", "norms.png"
PLOTS = (SWEEP, AVERAGES, NORMS)
DPI = 120


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def factor_value(value: str) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and math.isfinite(f) else None


def sweep_plot(table: Table, results: SuiteResults, path: Path) -> bool:
    """Score vs. rescale factor (log2 axis) for the sweep variants ``x<factor>``, seed means ± sd; a run
    stopped at its collapse as a red ✗, a scored collapsed one ringed in red; FLOPS and non-zeros below."""
    factor_of = {c.row: factor_value(c.factor) for c in results.conditions}
    method_of = {c.row: c.method for c in results.conditions}
    # the sweep's own arms x<factor>: named arms (x0.25-flops, x4-head-norm) are rows of the table only
    sweep_rows = [r for r in table.rows if r[0] == "splade" and re.fullmatch(r"x[0-9.e+-]+", r[2])
                  and factor_of.get(r) is not None]
    if len(sweep_rows) < 2:
        return False
    plt = _pyplot()
    with_sparsity = bool(table.sparsity)
    fig, axes = plt.subplots(2 if with_sparsity else 1, 1, figsize=(6.4, 6.4 if with_sparsity else 4.0), squeeze=False,
                             sharex=True)
    ax = axes[0, 0]
    series = list(dict.fromkeys((r[1], r[3]) for r in sweep_rows))
    data_cols = [c for c in table.columns if c.kind != "average"] or table.columns
    stopped_x: list[float] = []
    lows: list[float] = []
    ringed = False
    for backbone, trained in series:
        rows = sorted((r for r in sweep_rows if (r[1], r[3]) == (backbone, trained)), key=lambda r: factor_of[r])
        for col in data_cols:
            cells = [(factor_of[r], table.cells[(r, col.name)], table.info[r]) for r in rows]
            shown = [(x, c) for x, c, _ in cells if c.status == OK]
            methods = sorted({method_of.get(r) or "" for r in rows} - {""})
            label = (f"{backbone}{'' if trained else ' (untrained)'}" + (f" [{', '.join(methods)}]" if methods else "")
                     + (f" · {short_name(col.name)}" if len(data_cols) > 1 else ""))
            line = ax.errorbar([x for x, _ in shown], [c.value for _, c in shown],
                               yerr=[c.sd or 0.0 for _, c in shown], marker="o", capsize=3, label=label)
            color = line[0].get_color()
            lows.extend(c.value for _, c in shown)
            marked = [(x, c) for x, c, info in cells if c.status == OK and info.mark]
            if marked:
                ax.scatter([x for x, _ in marked], [c.value for _, c in marked], s=150, facecolors="none",
                           edgecolors="red", zorder=3, label=None if ringed else "collapsed/degraded (scored)")
                ringed = True
            stopped_x.extend(x for x, c, _ in cells if c.status == COLLAPSED)
            base = next((table.cells[(r, col.name)] for r in table.rows
                         if r[0] == "splade" and (r[1], r[3]) == (backbone, trained) and is_baseline(r[2])), None)
            if base is not None and base.status == OK:
                ax.axhline(base.value, color=color, linestyle="--", linewidth=1, label=f"{label}: baseline (unscaled)")
                lows.append(base.value)
        if with_sparsity:
            low = axes[1, 0]
            dataset = table.sparsity[0]
            for name, style in (("FLOPS", "-"), ("query_nnz", ":"), ("doc_nnz", "--")):
                pts = [(factor_of[r], table.sparse[(r, dataset)][name]) for r in rows
                       if table.sparse.get((r, dataset), {}).get(name) is not None]
                if pts:
                    low.plot([x for x, _ in pts], [y for _, y in pts], marker=".", linestyle=style, label=f"{backbone}: {name}")
    if stopped_x:
        bottom = (min(lows) if lows else 0.0) - 0.05
        ax.scatter(stopped_x, [bottom] * len(stopped_x), marker="x", color="red", s=60, zorder=3, label="collapsed (stopped)")
    ticks = sorted({factor_of[r] for r in sweep_rows})
    for a in axes[:, 0]:
        a.set_xscale("log", base=2)
        a.set_xticks(ticks)
        a.set_xticklabels([f"{t:g}" for t in ticks])
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    axes[-1, 0].set_xlabel("MLM-head rescale factor (log2)")
    ax.set_ylabel(data_cols[0].measure if len({c.measure for c in data_cols}) == 1 else "score")
    ax.set_title(f"{results.suite}: {data_cols[0].measure} vs. rescale factor")
    if with_sparsity:
        axes[1, 0].set_yscale("log")
        axes[1, 0].set_ylabel(f"FLOPS, non-zeros ({short_name(table.sparsity[0])})")
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI)
    plt.close(fig)
    return True


def averages_plot(table: Table, path: Path) -> bool:
    """Baseline vs. rescaled per backbone, one panel per average (the paper's headline comparison)."""
    averages = [c for c in table.columns if c.kind == "average"]
    backbones = list(dict.fromkeys(r[1] for r in table.rows if r[0] == "splade" and r[3]))
    variants = list(dict.fromkeys(r[2] for r in table.rows if r[0] == "splade" and r[3]))
    if not averages or len(backbones) < 2 or len(variants) < 2:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(len(averages), 1, figsize=(max(6.4, 0.8 * len(backbones)), 3.2 * len(averages)), squeeze=False)
    width = 0.8 / len(variants)
    for ax, col in zip(axes[:, 0], averages):
        for j, variant in enumerate(variants):
            for i, backbone in enumerate(backbones):
                cell = table.cells.get((("splade", backbone, variant, True), col.name))
                x = i + (j - (len(variants) - 1) / 2) * width
                if cell is not None and cell.status == OK:
                    ax.bar(x, cell.value, width, color=f"C{j}", label=variant if i == 0 else None,
                           hatch="//" if cell.partial else None)
                elif cell is not None and cell.status == COLLAPSED:
                    ax.text(x, 0.01, "collapsed", rotation=90, ha="center", va="bottom", fontsize=7, color="red")
        ax.set_xticks(range(len(backbones)))
        ax.set_xticklabels(backbones, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(col.measure)
        ax.set_title(col.name)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI)
    plt.close(fig)
    return True


def head_norms(results: SuiteResults) -> list[tuple[tuple[str, str, str, bool], Any]]:
    """One backbone record per SPLADE row: (row, condition) for rows whose backbone stage recorded norms."""
    seen: dict[Any, Any] = {}
    for c in results.conditions:
        if c.system == "splade" and c.head_norm_before is not None and c.row not in seen:
            seen[c.row] = c
    return list(seen.items())


def changed_statistic(c: ConditionResult) -> tuple[str, float | None, float | None]:
    """(the statistic c's rescale method moves, before, after); ‖W‖_F for records that do not say
    (those the norms plot leaves out: under head-norm ‖W‖_F does not move)."""
    from benchmark.rescale import SNAPSHOT_LABELS

    if c.changed and c.changed_before is not None:
        return SNAPSHOT_LABELS.get(c.changed, c.changed), c.changed_before, c.changed_after
    return SNAPSHOT_LABELS["head_norm"], c.head_norm_before, c.head_norm_after


def norms_plot(results: SuiteResults, path: Path) -> bool:
    """Per backbone and variant, the head statistic its rescale method moves (‖αW‖_F for projection,
    rms(γ) for head-norm, ‖W‖_F for tied/untie) before and after rescaling (log axis)."""
    rows = [(r, c) for r, c in head_norms(results) if r[3]] or head_norms(results)
    rows = [(r, c) for r, c in rows if c.changed]  # results written before the record named what moved: no plot
    if not any(c.scale not in (None, 1.0) for _, c in rows):  # nothing was rescaled: the table says it all
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.4, 0.5 * len(rows)), 3.6))
    xs = range(len(rows))
    stats = [changed_statistic(c) for _, c in rows]
    ax.bar([x - 0.2 for x in xs], [s[1] for s in stats], 0.4, label="before (pretrained)", color="C7")
    ax.bar([x + 0.2 for x in xs], [s[2] for s in stats], 0.4, label="after rescaling", color="C0")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r[1]} {r[2]}: {s[0]}" for (r, _), s in zip(rows, stats)], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("the statistic the method moves")
    ax.set_title(f"{results.suite}: MLM-head scale before/after rescaling")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI)
    plt.close(fig)
    return True
