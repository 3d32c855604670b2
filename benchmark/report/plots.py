"""Plots from the table model: the scale sweep (score, FLOPS and non-zeros vs. rescale factor), the
averages (baseline vs. rescaled per backbone) and the MLM-head norms before/after rescaling."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, cast

from benchmark.common.atomic import save_figure
from benchmark.common.confine import confined
from benchmark.pipeline.systems import BM25, SPLADE, RowKey, system
from benchmark.report.labels import is_baseline, system_label, trained_here
from benchmark.report.results import RESULTS, TELEMETRY_DIR, ConditionResult, SuiteResults
from benchmark.report.table import PARTIAL as PARTIAL_MARK, Table, short_name
from benchmark.training.outcomes import COLLAPSED, OK

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


#: a sweep arm's variant suffix → how the legend names it
ARM_LABELS = {
    "projection": "constant multiplier (projection, extension)",
    "flops": "FLOPS-matched λ",
    "head-norm": "head-norm (extension)",
}
#: a rescale method → how the sweep's legend names the line it draws
METHOD_LABELS = {
    "once": "the paper's operation on a shared matrix",
    "untie": "untied copy, extension",
    "projection": "multiplier, extension",
    "head-norm": "head LayerNorm, extension",
    "tied": "shared matrix, extension",
}
#: a sweep arm's variant suffix → its marker and line style: each reading of "rescale" its own mark
ARM_STYLES = {"": ("o", "-"), "projection": ("s", "--"), "flops": ("D", ":"), "head-norm": ("^", "-.")}
OTHER_MARKERS = ("v", "P", "X", "*", "<", ">")
SPARSE_STYLES = (("FLOPS", "FLOPS", "-"), ("query_nnz", "q nnz", ":"), ("doc_nnz", "d nnz", "--"))
SWEEP_VARIANT = re.compile(r"x(?P<factor>[0-9.]+)(?:-(?P<arm>.+))?")


def sweep_arm(variant: str) -> str | None:
    """ "" for a point of the sweep's main line (``x<factor>``, or the baseline: factor 1), the arm's name for
    a variant such as ``x4-projection`` or ``x0.25-flops`` (another reading, drawn apart), None for a
    variant outside the sweep."""
    if is_baseline(variant):
        return ""
    m = SWEEP_VARIANT.fullmatch(variant)
    return None if m is None else (m.group("arm") or "")


def arm_style(arm: str, others: list[str]) -> tuple[str, str]:
    """The marker and line style of an arm; arms without their own style take the next free marker."""
    if arm in ARM_STYLES:
        return ARM_STYLES[arm]
    if arm not in others:
        others.append(arm)
    return OTHER_MARKERS[others.index(arm) % len(OTHER_MARKERS)], ":"


def sweep_plot(table: Table, results: SuiteResults, path: Path) -> list[str]:
    """Draw ``sweep_figure`` to ``path``; returns its legend's entries (empty: no plot)."""
    fig = sweep_figure(table, results)
    if fig is None:
        return []
    save_figure(fig, path, dpi=DPI)
    entries = legend_entries(fig)
    _pyplot().close(fig)
    return entries


def sweep_figure(table: Table, results: SuiteResults) -> Any:
    """Score vs. rescale factor (log2 axis), seed means ± sd: the main line through the ``x<factor>`` variants
    and the baseline (×1, also dashed across), and each other reading (``x4-projection``, ``x0.25-flops``)
    as its own series with its own marker; a run stopped at its collapse as a red ✗, a scored collapsed one
    ringed in red; FLOPS and non-zeros below. Legends sit right of the axes, off the lines. None: no sweep."""
    factor_of = {c.row: factor_value(c.factor) for c in results.conditions}
    method_of = {c.row: c.method for c in results.conditions}
    sweep_rows = [
        r
        for r in table.rows
        if system(r[0]).has_baseline and factor_of.get(r) is not None and sweep_arm(r[2]) is not None
    ]
    if sum(1 for r in sweep_rows if r[2].startswith("x") and sweep_arm(r[2]) == "") < 2:
        return None
    plt = _pyplot()
    from matplotlib.lines import Line2D

    with_sparsity = any(n in table.sparse_names for n in ("FLOPS", "query_nnz", "doc_nnz"))
    fig, axes = plt.subplots(
        2 if with_sparsity else 1,
        1,
        figsize=(10.0, 6.6 if with_sparsity else 4.0),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    ax = axes[0, 0]
    # (backbone, trained, arm): a sweep row has an arm (sweep_arm is not None)
    series = cast("list[tuple[str, bool, str]]", list(dict.fromkeys((r[1], r[3], sweep_arm(r[2])) for r in sweep_rows)))
    backbones = list(dict.fromkeys((b, t) for b, t, _ in series))
    data_cols = [c for c in table.columns if c.kind != "average"] or table.columns
    stopped_x: list[float] = []
    lows: list[float] = []
    ringed = False
    others: list[str] = []
    low_handles: list[Any] = []
    for backbone, trained, arm in series:
        # the baseline is ×1 of every reading (no rescale at all): each line passes through it
        rows = sorted(
            (
                r
                for r in sweep_rows
                if (r[1], r[3]) == (backbone, trained) and (sweep_arm(r[2]) == arm or is_baseline(r[2]))
            ),
            key=lambda r: cast(float, factor_of[r]),  # a sweep row has a factor
        )
        marker, style = arm_style(arm, others)
        color = f"C{backbones.index((backbone, trained)) % 10}"
        methods = sorted({method_of.get(r) or "" for r in rows if not is_baseline(r[2])} - {""})
        meaning = [METHOD_LABELS.get(m, m) for m in methods]
        if arm and arm not in methods:
            meaning.append(ARM_LABELS.get(arm, arm))
        name = f"{backbone}{'' if trained else ' (untrained)'} x<f>{'-' + arm if arm else ''}" + (
            f": {', '.join(meaning)}" if meaning else ""
        )
        hollow: dict[str, Any] = {"markerfacecolor": "none"} if arm else {}
        for col in data_cols:
            cells = [(cast(float, factor_of[r]), table.cells[(r, col.name)], table.info[r]) for r in rows]
            shown = [(x, c) for x, c, _ in cells if c.status == OK]
            label = name + (f" · {short_name(col.name)}" if len(data_cols) > 1 else "")
            ax.errorbar(
                [x for x, _ in shown],
                [c.value for _, c in shown],
                yerr=[c.sd or 0.0 for _, c in shown],
                marker=marker,
                linestyle=style,
                capsize=3,
                color=color,
                label=label,
                **hollow,
            )
            lows.extend(cast(float, c.value) for _, c in shown)  # status OK: a value
            marked = [(x, c) for x, c, info in cells if c.status == OK and info.mark]
            if marked:
                ax.scatter(
                    [x for x, _ in marked],
                    [c.value for _, c in marked],
                    s=150,
                    facecolors="none",
                    edgecolors="red",
                    zorder=3,
                    label=None if ringed else "marked: collapsed, degraded or lost (scored)",
                )
                ringed = True
            stopped_x.extend(x for x, c, _ in cells if c.status == COLLAPSED)
            base = next(
                (
                    table.cells[(r, col.name)]
                    for r in table.rows
                    if system(r[0]).has_baseline and (r[1], r[3]) == (backbone, trained) and is_baseline(r[2])
                ),
                None,
            )
            if not arm and base is not None and base.status == OK:
                ax.axhline(
                    base.value,
                    color=color,
                    linestyle="--",
                    linewidth=1,
                    label=f"{backbone}{'' if trained else ' (untrained)'}: baseline (unscaled)",
                )
                lows.append(cast(float, base.value))
        if with_sparsity:
            low = axes[1, 0]
            dataset = table.sparsity[0]
            for n, (quantity, _, line) in enumerate(SPARSE_STYLES):
                pts = [
                    (factor_of[r], table.sparse[(r, dataset)][quantity])
                    for r in rows
                    if table.sparse.get((r, dataset), {}).get(quantity) is not None
                ]
                if pts:
                    low.plot(
                        [x for x, _ in pts],
                        [y for _, y in pts],
                        marker=marker,
                        linestyle=line,
                        color=f"C{n}",
                        linewidth=1.6 if not arm else 1.0,
                        **hollow,
                    )
            low_handles.append(Line2D([], [], color="0.25", marker=marker, linestyle="none", label=name, **hollow))
    if stopped_x:
        bottom = (min(lows) if lows else 0.0) - 0.05
        ax.scatter(
            stopped_x, [bottom] * len(stopped_x), marker="x", color="red", s=60, zorder=3, label="collapsed (stopped)"
        )
    ticks = sorted({cast(float, factor_of[r]) for r in sweep_rows})
    for a in axes[:, 0]:
        a.set_xscale("log", base=2)
        a.set_xticks(ticks)
        a.set_xticklabels([f"{t:g}" for t in ticks])
        a.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    axes[-1, 0].set_xlabel("MLM-head rescale factor (log2)")
    ax.set_ylabel(data_cols[0].measure if len({c.measure for c in data_cols}) == 1 else "score")
    ax.set_title(f"{results.suite}: {data_cols[0].measure} vs. rescale factor")
    if with_sparsity:
        low = axes[1, 0]
        low.set_yscale("log")
        low.set_ylabel(f"FLOPS, non-zeros ({short_name(table.sparsity[0])})")
        quantities = [
            Line2D([], [], color=f"C{n}", linestyle=line, label=label)
            for n, (_, label, line) in enumerate(SPARSE_STYLES)
        ]
        low.legend(
            handles=quantities + low_handles,
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )
    return fig


def legend_entries(fig: Any) -> list[str]:
    """Every legend's labels in the figure, in order: what a reader can match to the marks."""
    return [t.get_text() for ax in fig.axes if ax.get_legend() is not None for t in ax.get_legend().get_texts()]


#: (hatch, legend) of a bar whose row carries an outcome mark
MARK_COLLAPSED = ("xx", "collapsed in training (scored: trained to its end)")
MARK_OTHER = ("..", "degraded, or judged against another run (the table's mark)")


def averages_plot(table: Table, path: Path) -> list[str]:
    """Baseline vs. rescaled per backbone, one panel per average (the paper's headline comparison), with
    BM25's average as a line across and each row's training outcome on its bar: a red-edged, hatched bar
    for a scored run marked collapsed or degraded, a red ✗ for a run stopped at its collapse (no score)."""
    averages = [c for c in table.columns if c.kind == "average"]
    backbones = list(dict.fromkeys(r[1] for r in table.rows if trained_here(r)))
    variants = list(dict.fromkeys(r[2] for r in table.rows if trained_here(r)))
    if not averages or len(backbones) < 2 or len(variants) < 2:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(averages),
        1,
        figsize=(max(8.4, 0.8 * len(backbones) + 2.5), 3.2 * len(averages)),
        squeeze=False,
        layout="constrained",
    )
    width = 0.8 / len(variants)
    bm25 = next((r for r in table.rows if r[0] == BM25), None)
    for ax, col in zip(axes[:, 0], averages):
        stopped_label, partial_label = (
            "collapsed (stopped, no score)",
            f"{PARTIAL_MARK} leaves out columns without a score",
        )
        shown: set[str] = set()
        for j, variant in enumerate(variants):
            labelled = False  # one legend entry per variant, on its first bar (whichever backbone has one)
            for i, backbone in enumerate(backbones):
                key = RowKey(SPLADE, backbone, variant, True)
                cell = table.cells.get((key, col.name))
                x = i + (j - (len(variants) - 1) / 2) * width
                if cell is not None and cell.status == OK:
                    info = table.info[key]
                    mark = MARK_COLLAPSED if info.outcomes.get(COLLAPSED) else MARK_OTHER if info.mark else None
                    hatch = ((mark[0] if mark else "") + ("//" if cell.partial else "")) or None
                    ax.bar(
                        x,
                        cell.value,
                        width,
                        color=f"C{j}",
                        label=None if labelled else variant,
                        hatch=hatch,
                        edgecolor="red" if mark else "0.3" if cell.partial else None,
                        linewidth=1.0 if mark else 0,
                    )
                    labelled = True
                    for legend, (pattern, edge) in (
                        (mark and mark[1], (mark and mark[0], "red")),
                        (cell.partial and partial_label, ("//", "0.3")),
                    ):
                        if legend and legend not in shown:
                            ax.bar(x, 0, 0, color="white", edgecolor=edge, hatch=pattern, label=legend)
                            shown.add(legend)
                elif cell is not None and cell.status == COLLAPSED:
                    ax.scatter(
                        [x],
                        [0],
                        marker="x",
                        color="red",
                        s=60,
                        zorder=3,
                        clip_on=False,
                        label=None if stopped_label in shown else stopped_label,
                    )
                    shown.add(stopped_label)
        if bm25 is not None and (ref := table.cells.get((bm25, col.name))) is not None and ref.status == OK:
            ax.axhline(ref.value, color="0.2", linestyle="--", linewidth=1.2, label="BM25")
        ax.set_xticks(range(len(backbones)))
        ax.set_xticklabels(backbones, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(col.measure)
        ax.set_title(col.name)
        handles, names = ax.get_legend_handles_labels()
        order = sorted(range(len(names)), key=lambda k: (names[k] not in variants, names[k] != "BM25"))
        ax.legend(
            [handles[k] for k in order],
            [names[k] for k in order],
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )
        ax.grid(True, axis="y", alpha=0.3)
    save_figure(fig, path, dpi=DPI)
    entries = legend_entries(fig)
    plt.close(fig)
    return entries


def head_norms(results: SuiteResults) -> list[tuple[RowKey, ConditionResult]]:
    """One backbone record per SPLADE row: (row, condition) for rows whose backbone stage recorded norms."""
    seen: dict[RowKey, ConditionResult] = {}
    for c in results.conditions:
        if system(c.system).trains and c.head_norm_before is not None and c.row not in seen:
            seen[c.row] = c
    return list(seen.items())


def changed_statistic(c: ConditionResult) -> tuple[str, float | None, float | None]:
    """(the statistic c's rescale method moves, before, after); ‖W‖_F for records that do not say
    (those the norms plot leaves out: under head-norm ‖W‖_F does not move)."""
    from benchmark.model.rescale import SNAPSHOT_LABELS

    if c.changed and c.changed_before is not None:
        return SNAPSHOT_LABELS.get(c.changed, c.changed), c.changed_before, c.changed_after
    return SNAPSHOT_LABELS["head_norm"], c.head_norm_before, c.head_norm_after


def norms_plot(results: SuiteResults, path: Path) -> list[str]:
    """Per backbone and variant, the head statistic its rescale method moves (‖αW‖_F for projection,
    rms(γ) for head-norm, ‖W‖_F for tied/untie) before and after rescaling (log axis)."""
    rows = [(r, c) for r, c in head_norms(results) if r[3]] or head_norms(results)
    rows = [(r, c) for r, c in rows if c.changed]  # results written before the record named what moved: no plot
    if not any(c.scale not in (None, 1.0) for _, c in rows):  # nothing was rescaled: the table says it all
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.4, 0.5 * len(rows)), 3.6))
    xs = range(len(rows))
    stats = [changed_statistic(c) for _, c in rows]
    ax.bar([x - 0.2 for x in xs], [s[1] for s in stats], 0.4, label="before (pretrained)", color="C7")
    ax.bar([x + 0.2 for x in xs], [s[2] for s in stats], 0.4, label="after rescaling", color="C0")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(
        [f"{r[1]} {r[2]}: {s[0]}" for (r, _), s in zip(rows, stats)], rotation=30, ha="right", fontsize=8
    )
    ax.set_yscale("log")
    ax.set_ylabel("the statistic the method moves")
    ax.set_title(f"{results.suite}: MLM-head scale before/after rescaling")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI)
    entries = legend_entries(fig)
    plt.close(fig)
    return entries


def telemetry_title(c: ConditionResult) -> str:
    """What a telemetry plot is of: the row, the rescale method and factor, the seed and the outcome."""
    rescale = f"{c.method} ×{c.factor}" if c.method else "head unscaled"
    seed = "" if c.seed is None else f" · seed {c.seed}"
    step = "" if c.outcome_step is None else f" at step {c.outcome_step}"
    reason = f" ({c.outcome_reason})" if c.outcome_reason else ""
    return f"{system_label(*c.row)} · {rescale}{seed} · {c.outcome}{step}{reason}"


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def telemetry_plots(results: SuiteResults, folder: Path) -> list[str]:
    """Each training run's telemetry plot, redrawn from its ``telemetry/<train id>.csv`` (written with the
    results) under a title naming it; runs recorded without the CSV keep the plot their train stage drew."""
    import csv

    from benchmark.training.telemetry import plot_png

    drawn = []
    for c in {c.train_id: c for c in reversed(results.conditions) if c.trained and c.telemetry}.values():
        rows_file = confined(folder, f"{TELEMETRY_DIR}/{c.train_id}.csv", f"{RESULTS}'s train_id of {c.key}")
        png = confined(folder, c.telemetry, f"{RESULTS}'s telemetry of {c.key}")
        if not rows_file.is_file():
            continue
        with open(rows_file, encoding="utf-8", newline="") as fh:
            rows = [{k: _number(v) for k, v in row.items() if v != ""} for row in csv.DictReader(fh)]
        label = f"{c.outcome}: {c.outcome_reason}" if c.outcome_reason else ""
        plot_png(rows, png, telemetry_title(c), c.outcome_step, label, c.armed_step)
        drawn.append(c.telemetry)
    return sorted(drawn)
