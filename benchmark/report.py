"""Results: ``results/<suite>/metrics.csv`` (long format), the paper-style tables ``table.md``,
``table.csv``, ``table.tex``, plots (``*.png``), and the manifest that lets
``python -m benchmark.report`` regenerate all of them from ``runs/`` without recomputing anything.

A table has one row per system (backbone × variant, plus BM25) and one column per dataset, per
averaged group of datasets (CQADupStack) and per average (BEIR, MS MARCO + DL). Each SPLADE cell
shows its difference Δ to the same backbone's baseline; a dagger marks a significant one (paired
t-test over queries, Holm-corrected over the row's datasets, ``benchmark.significance``). A
collapsed training run reads "collapsed", is never scored as 0, and is left out of averages.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.atomic import save_figure, write_json, write_text
from benchmark.errors import BenchmarkError
from benchmark.stage import CONFIG, Store, read_meta

MANIFEST = "manifest.json"
METRIC_COLUMNS = ["suite", "dataset", "system", "backbone", "variant", "factor", "trained", "measure", "value",
                  "status", "evaluate_id", "train_id"]
TABLE_COLUMNS = ["table", "row", "system", "backbone", "variant", "trained", "column", "kind", "measure", "value",
                 "delta", "p_value", "p_holm", "significant", "best", "partial", "status"]
OK, COLLAPSED, MISSING = "ok", "collapsed", "missing"
BASELINE = "baseline"
DAGGER = "†"
PARTIAL = "*"

#: Column labels for well-known datasets; BEIR ids fall back to their dataset name.
SHORT_NAMES = {
    "msmarco-passage/dev/small": "MS MARCO dev",
    "msmarco-passage/trec-dl-2019/judged": "DL19",
    "msmarco-passage/trec-dl-2020/judged": "DL20",
    "beir/cqadupstack": "CQADupStack",
    "beir/webis-touche2020/v2": "Touché-2020",
}


# --------------------------------------------------------------------------- manifest and metrics.csv


def system_label(row: dict[str, Any]) -> str:
    if row["system"] == "bm25":
        return "BM25"
    label = f"SPLADE {row['backbone']} {row['variant']}"
    return label if row["trained"] else f"{label} (untrained)"


def collect_rows(plan: Any, store: Store) -> list[dict[str, Any]]:
    """One manifest row per condition, with its status: ok, collapsed, or missing."""
    rows = []
    for cond in plan.conditions:
        status = OK
        train_meta = store.load(cond.train) if cond.train is not None else None
        if train_meta is not None and train_meta["record"].get("status") == COLLAPSED:
            status = COLLAPSED
        elif store.load(cond.evaluate) is None:
            status = MISSING
        rows.append({**cond.row(), "status": status, "evaluate_id": cond.evaluate.id,
                     "train_id": cond.train.id if cond.train is not None else ""})
    return rows


class Runs:
    """Read-only access to the evaluate stages a manifest names (metrics and per-query values)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._metrics: dict[str, dict[str, float]] = {}
        self._perquery: dict[str, dict[str, dict[str, float]] | None] = {}

    def metrics(self, evaluate_id: str) -> dict[str, float]:
        if evaluate_id not in self._metrics:
            path = self.root / "evaluate" / evaluate_id / CONFIG
            try:
                meta = read_meta(path.parent)
            except (OSError, ValueError):
                raise BenchmarkError(
                    f"evaluate stage {evaluate_id} is not in {self.root} ({path} unreadable); pass the runs folder the "
                    "manifest was made with as --runs-dir, or rerun the suite"
                ) from None
            self._metrics[evaluate_id] = meta["record"]["metrics"]
        return self._metrics[evaluate_id]

    def perquery(self, evaluate_id: str, measure: str) -> dict[str, float] | None:
        """query id → value, or None for an evaluate stage without per-query values."""
        if evaluate_id not in self._perquery:
            from benchmark.evaluate import read_perquery

            try:
                self._perquery[evaluate_id] = read_perquery(self.root / "evaluate" / evaluate_id)
            except OSError:
                self._perquery[evaluate_id] = None
        values = self._perquery[evaluate_id]
        return None if values is None else values.get(measure)


def metric_rows(suite: str, manifest_rows: list[dict[str, Any]], measures: list[str], runs: Path,
                dataset_measures: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    reader = Runs(runs)
    out = []
    for row in manifest_rows:
        metrics = reader.metrics(row["evaluate_id"]) if row["status"] == OK else {}
        for measure in (dataset_measures or {}).get(row["dataset"], measures):
            value = metrics.get(measure)
            out.append({"suite": suite, **{k: row[k] for k in ("dataset", "system", "backbone", "variant", "factor", "trained")},
                        "measure": measure, "value": "" if value is None else f"{value:.4f}", "status": row["status"],
                        "evaluate_id": row["evaluate_id"], "train_id": row["train_id"]})
    return out


def to_csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


# --------------------------------------------------------------------------- the table model

RowKey = tuple[str, str, str, bool]  # (system, backbone, variant, trained), as Condition.system_key


@dataclass(frozen=True)
class Column:
    name: str  # dataset id, group name, or average name
    kind: str  # dataset | group | average
    measure: str
    members: tuple[str, ...] = ()  # a group's datasets, an average's columns


@dataclass
class Cell:
    status: str  # ok | collapsed | missing
    value: float | None = None
    delta: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    significant: bool = False
    best: bool = False
    partial: bool = False  # an average that left collapsed datasets out


@dataclass
class Table:
    title: str
    measure: str | None  # the single measure of every column, None when columns differ
    columns: list[Column]
    rows: list[RowKey]
    labels: dict[RowKey, str]
    cells: dict[tuple[RowKey, str], Cell]
    alpha: float
    digits: int
    notes: list[str] = field(default_factory=list)


def short_name(dataset: str, labels: dict[str, str] | None = None) -> str:
    if labels and dataset in labels:
        return labels[dataset]
    if dataset in SHORT_NAMES:
        return SHORT_NAMES[dataset]
    if dataset.startswith("beir/"):
        return dataset.split("/")[1]
    if dataset.startswith(("/", ".", "~")):  # a local BEIR folder: its name, and the split if not test
        folder, _, split = dataset.partition("@")
        return Path(folder).name + (f"@{split}" if split else "")
    return dataset


def _row_key(row: dict[str, Any]) -> RowKey:
    return (row["system"], row["backbone"], row["variant"], bool(row["trained"]))


def baseline_of(key: RowKey) -> RowKey | None:
    """The row a SPLADE row's Δ is taken against: the same backbone and training, unrescaled."""
    system, backbone, variant, trained = key
    if system == "bm25" or variant == BASELINE:
        return None
    return (system, backbone, BASELINE, trained)


def manifest_columns(manifest: dict[str, Any]) -> list[str]:
    return manifest.get("columns") or list(dict.fromkeys(c["dataset"] for c in manifest["conditions"]))


def column_measures(manifest: dict[str, Any], column: str) -> list[str]:
    """The measures evaluated on a dataset column (a group: on its members)."""
    per = manifest.get("dataset_measures") or {}
    members = (manifest.get("groups") or {}).get(column) or [column]
    return per.get(members[0], manifest["measures"])


def build_table(manifest: dict[str, Any], runs: Runs, measure_for: Callable[[str], str | None], title: str,
                settings: Any) -> Table:
    """The cells of one table; ``measure_for`` gives each dataset/group column its measure (None: no column)."""
    from benchmark.significance import holm, paired_ttest

    conditions = manifest["conditions"]
    groups: dict[str, list[str]] = manifest.get("groups", {})
    column_names = [n for n in manifest_columns(manifest) if measure_for(n) is not None]
    by: dict[tuple[RowKey, str], dict[str, Any]] = {(_row_key(c), c["dataset"]): c for c in conditions}
    rows = list(dict.fromkeys(_row_key(c) for c in conditions))
    labels = {r: system_label({"system": r[0], "backbone": r[1], "variant": r[2], "trained": r[3]}) for r in rows}

    columns = [Column(n, "group" if n in groups else "dataset", measure_for(n), tuple(groups.get(n, ())))
               for n in column_names]
    for avg in settings.averages:
        if all(d in column_names for d in avg.datasets):  # an average over a subset would mislead: leave it out
            measures = {measure_for(d) for d in avg.datasets}
            columns.append(Column(avg.name, "average", measures.pop() if len(measures) == 1 else "mixed", tuple(avg.datasets)))

    def single(row: RowKey, dataset: str, measure: str) -> Cell:
        cond = by.get((row, dataset))
        if cond is None or cond["status"] != OK:
            return Cell(MISSING if cond is None else cond["status"])
        value = runs.metrics(cond["evaluate_id"]).get(measure)
        return Cell(OK, value) if value is not None else Cell(MISSING)

    def perquery(row: RowKey, col: Column) -> dict[str, float] | None:
        pooled: dict[str, float] = {}
        for dataset in col.members or (col.name,):
            values = runs.perquery(by[(row, dataset)]["evaluate_id"], col.measure)
            if values is None:
                return None
            pooled.update({f"{dataset}\t{q}": v for q, v in values.items()} if col.members else values)
        return pooled

    cells: dict[tuple[RowKey, str], Cell] = {}
    for row in rows:
        for col in columns:
            if col.kind == "dataset":
                cells[(row, col.name)] = single(row, col.name, col.measure)
            elif col.kind == "group":  # BEIR's CQADupStack: the mean over its forums, only when all are there
                parts = [single(row, d, col.measure) for d in col.members]
                cells[(row, col.name)] = _combine(parts, partial_ok=False)

    for row in rows:  # Δ and significance against the same backbone's baseline, Holm over the row
        ref = baseline_of(row)
        if ref is None or ref not in labels:
            continue
        tested: list[Cell] = []
        for col in columns:
            if col.kind == "average":
                continue
            cell, base = cells[(row, col.name)], cells[(ref, col.name)]
            if cell.status == OK and base.status == OK:
                cell.delta = cell.value - base.value
                a, b = perquery(row, col), perquery(ref, col)
                if a is not None and b is not None:
                    cell.p_value = paired_ttest(a, b).p_value
                    tested.append(cell)
        for cell, adjusted in zip(tested, holm([c.p_value for c in tested])):
            cell.p_holm = adjusted
            cell.significant = adjusted < settings.alpha

    for row in rows:
        for col in columns:
            if col.kind == "average":
                cells[(row, col.name)] = _combine([cells[(row, m)] for m in col.members], partial_ok=True)
    for row in rows:
        ref = baseline_of(row)
        for col in columns:
            cell = cells[(row, col.name)]
            base = cells.get((ref, col.name)) if ref in labels else None
            if col.kind == "average" and base is not None and cell.status == base.status == OK and not (cell.partial or base.partial):
                cell.delta = cell.value - base.value

    for col in columns:  # bold: the best shown value of the column, when there is something to compare
        shown = {r: round(cells[(r, col.name)].value, settings.digits) for r in rows
                 if cells[(r, col.name)].status == OK and not cells[(r, col.name)].partial}
        if len(set(shown.values())) >= 2:  # something to compare, and not all equal
            top = max(shown.values())
            for r, v in shown.items():
                cells[(r, col.name)].best = v == top

    measures = {c.measure for c in columns}
    table = Table(title, measures.pop() if len(measures) == 1 else None, columns, rows, labels, cells,
                  settings.alpha, settings.digits)
    table.notes = _notes(table, groups)
    return table


def _combine(parts: list[Cell], partial_ok: bool) -> Cell:
    """Mean of the parts; a missing part makes it missing; collapsed parts are left out (``partial``)."""
    if not parts or any(p.status == MISSING for p in parts):
        return Cell(MISSING)
    ok = [p.value for p in parts if p.status == OK]
    if not ok:
        return Cell(COLLAPSED)
    if len(ok) < len(parts) and not partial_ok:
        return Cell(COLLAPSED)
    return Cell(OK, sum(ok) / len(ok), partial=len(ok) < len(parts))


def _notes(table: Table, groups: dict[str, list[str]]) -> list[str]:
    cells = table.cells.values()
    notes = []
    if any(c.delta is not None for c in cells):
        n = sum(1 for c in table.columns if c.kind != "average")
        notes.append(f"In parentheses: Δ to the same backbone's baseline (same training). {DAGGER}: significant at "
                     f"α = {table.alpha:g} by a two-sided paired t-test over queries against that baseline, "
                     f"Holm-corrected over the row's {n} dataset(s).")
    if any(c.best for c in cells):
        notes.append("Bold: best in the column.")
    if any(c.status == COLLAPSED for c in cells):
        notes.append(f"collapsed: the training run collapsed (its train stage says why); it has no score, is never "
                     f"counted as 0, and is excluded from averages. {PARTIAL}: an average over only the datasets "
                     "that did not collapse.")
    if any(c.status == MISSING for c in cells):
        notes.append("—: not run yet (run the suite to fill it in).")
    for col in table.columns:
        if col.kind == "group":
            notes.append(f"{short_name(col.name)}: mean over its {len(col.members)} sub-forums, as BEIR reports it; "
                         "its significance test pools their queries.")
    return notes


# --------------------------------------------------------------------------- rendering


def _num(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _delta(value: float, digits: int) -> str:
    text = f"{value:+.{digits}f}"
    return text.replace("+0." + "0" * digits, "±0." + "0" * digits).replace("-0." + "0" * digits, "±0." + "0" * digits)


def _header(table: Table, col: Column, labels: dict[str, str] | None) -> str:
    name = col.name if col.kind == "average" else short_name(col.name, labels)
    return name if table.measure is not None else f"{name} ({col.measure})"


def markdown(table: Table, labels: dict[str, str] | None = None) -> str:
    first = table.measure if table.measure is not None else "System"
    lines = [f"| {first} | " + " | ".join(_header(table, c, labels) for c in table.columns) + " |",
             "|---|" + "---:|" * len(table.columns)]
    for row in table.rows:
        cells = []
        for col in table.columns:
            cell = table.cells[(row, col.name)]
            if cell.status != OK:
                cells.append(COLLAPSED if cell.status == COLLAPSED else "—")
                continue
            text = _num(cell.value, table.digits)
            text = f"**{text}**" if cell.best else text
            text += PARTIAL if cell.partial else ""
            if cell.delta is not None:
                text += f" ({_delta(cell.delta, table.digits)})"
            text += DAGGER if cell.significant else ""
            cells.append(text)
        lines.append(f"| {table.labels[row]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def latex(table: Table, labels: dict[str, str] | None = None) -> str:
    """A booktabs table; the reader's preamble needs ``\\usepackage{booktabs}``."""
    head = ["System", *(_header(table, c, labels) for c in table.columns)]
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             rf"\caption{{{latex_escape(table.title)}}}",
             r"\begin{tabular}{l" + "r" * len(table.columns) + "}", r"\toprule",
             " & ".join(latex_escape(h) for h in head) + r" \\", r"\midrule"]
    previous = None
    for row in table.rows:
        if previous is not None and (row[0], row[1]) != (previous[0], previous[1]):
            lines.append(r"\midrule")
        previous = row
        cells = [latex_escape(table.labels[row])]
        for col in table.columns:
            cell = table.cells[(row, col.name)]
            if cell.status != OK:
                cells.append(r"\textit{collapsed}" if cell.status == COLLAPSED else "--")
                continue
            text = _num(cell.value, table.digits)
            text = rf"\textbf{{{text}}}" if cell.best else text
            text += "$^*$" if cell.partial else ""
            if cell.delta is not None:
                delta = _delta(cell.delta, table.digits).replace("±", r"$\pm$")
                text += rf"\,{{\scriptsize({delta})}}"
            text += r"$^\dagger$" if cell.significant else ""
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if table.notes:
        notes = " ".join(table.notes).replace(DAGGER, "$^\\dagger$").replace("α", "$\\alpha$").replace("±", "$\\pm$").replace("Δ", "$\\Delta$")
        notes = notes.replace("—:", "--:").replace(f"{PARTIAL}:", "$^*$:")
        lines.append(r"\par\smallskip\parbox{\linewidth}{\footnotesize " + notes.replace("_", r"\_").replace("%", r"\%") + "}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def tidy_rows(table: Table) -> list[dict[str, Any]]:
    def fmt(x: float | None) -> str:  # scores to 6 decimals, p-values to 6 significant digits
        return "" if x is None else f"{x:.6f}"

    def fmt_p(x: float | None) -> str:
        return "" if x is None else f"{x:.6g}"

    out = []
    for row in table.rows:
        for col in table.columns:
            cell = table.cells[(row, col.name)]
            out.append({"table": table.title, "row": table.labels[row], "system": row[0], "backbone": row[1],
                        "variant": row[2], "trained": row[3], "column": col.name, "kind": col.kind,
                        "measure": col.measure, "value": fmt(cell.value), "delta": fmt(cell.delta),
                        "p_value": fmt_p(cell.p_value), "p_holm": fmt_p(cell.p_holm), "significant": cell.significant,
                        "best": cell.best, "partial": cell.partial, "status": cell.status})
    return out


# --------------------------------------------------------------------------- plots


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _factor(value: str) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and math.isfinite(f) else None


def sweep_plot(table: Table, manifest: dict[str, Any], path: Path) -> bool:
    """Score vs. rescale factor (log2 axis) for the sweep variants ``x<factor>``; collapsed runs as ✗."""
    factor_of = {_row_key(c): _factor(c["factor"]) for c in manifest["conditions"]}
    sweep_rows = [r for r in table.rows if r[0] == "splade" and r[2].startswith("x") and factor_of.get(r) is not None]
    if len(sweep_rows) < 2:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    series = list(dict.fromkeys((r[1], r[3]) for r in sweep_rows))
    data_cols = [c for c in table.columns if c.kind != "average"] or table.columns
    collapsed_x: list[float] = []
    lows: list[float] = []
    for (backbone, trained) in series:
        for col in data_cols:
            rows = sorted((r for r in sweep_rows if (r[1], r[3]) == (backbone, trained)), key=lambda r: factor_of[r])
            xs = [factor_of[r] for r in rows if table.cells[(r, col.name)].status == OK]
            ys = [table.cells[(r, col.name)].value for r in rows if table.cells[(r, col.name)].status == OK]
            label = f"{backbone}{'' if trained else ' (untrained)'}" + (f" · {short_name(col.name)}" if len(data_cols) > 1 else "")
            (line,) = ax.plot(xs, ys, marker="o", label=label)
            lows.extend(ys)
            collapsed_x.extend(factor_of[r] for r in rows if table.cells[(r, col.name)].status == COLLAPSED)
            base = table.cells.get((("splade", backbone, BASELINE, trained), col.name))
            if base is not None and base.status == OK:
                ax.axhline(base.value, color=line.get_color(), linestyle="--", linewidth=1,
                           label=f"{label}: baseline (unscaled)")
                lows.append(base.value)
    if collapsed_x:
        bottom = (min(lows) if lows else 0.0) - 0.05
        ax.scatter(collapsed_x, [bottom] * len(collapsed_x), marker="x", color="red", s=60, zorder=3, label="collapsed")
    ax.set_xscale("log", base=2)
    ticks = sorted({factor_of[r] for r in sweep_rows})
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set_xlabel("MLM-head rescale factor (log2)")
    ax.set_ylabel(data_cols[0].measure if len({c.measure for c in data_cols}) == 1 else "score")
    ax.set_title(f"{manifest['suite']}: {data_cols[0].measure} vs. rescale factor")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
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
    _save(fig, path)
    plt.close(fig)
    return True


def _save(fig: Any, path: Path) -> None:
    save_figure(fig, path, dpi=120)


# --------------------------------------------------------------------------- one suite's outputs


def table_settings(manifest: dict[str, Any]) -> Any:
    from benchmark.config import from_dict
    from benchmark.suites import Table as TableSettings

    return from_dict(TableSettings, manifest.get("table") or {}, f"{MANIFEST} table")


def suite_tables(manifest: dict[str, Any], runs: Runs) -> list[Table]:
    """The headline table (each dataset's own measure) and one table per measure, without duplicates."""
    settings = table_settings(manifest)
    measures = manifest["measures"]
    headline = settings.measure or measures[0]

    def headline_for(name: str) -> str:
        """The table's choice for the column, else the headline measure, else the column's first measure."""
        own = column_measures(manifest, name)
        return settings.measure_for.get(name) or (headline if headline in own else own[0])

    tables = [build_table(manifest, runs, headline_for, f"{manifest['suite']}: headline measures", settings)]
    columns = manifest_columns(manifest)
    same = all(headline_for(c) == headline for c in columns)
    for measure in measures:
        if same and measure == headline:
            tables[0].title = f"{manifest['suite']}: {measure}"
            continue
        tables.append(build_table(manifest, runs, lambda name, m=measure: m if m in column_measures(manifest, name) else None,
                                  f"{manifest['suite']}: {measure}", settings))
    return tables


def render(suite: str, manifest: dict[str, Any], runs: Path, out_dir: Path) -> Path:
    measures = manifest["measures"]
    rows = metric_rows(suite, manifest["conditions"], measures, runs, manifest.get("dataset_measures"))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "metrics.csv", to_csv(rows, METRIC_COLUMNS))
    reader = Runs(runs)
    tables = suite_tables(manifest, reader)
    labels = table_settings(manifest).labels
    md = [f"# {suite}\n"]
    for table in tables:
        md.append(f"## {table.title}\n\n" + markdown(table, labels) + "".join(f"\n{n}\n" for n in table.notes) + "\n")
    write_text(out_dir / "table.md", "\n".join(md))
    write_text(out_dir / "table.csv", to_csv([r for t in tables for r in tidy_rows(t)], TABLE_COLUMNS))
    write_text(out_dir / "table.tex", "% generated by python -m benchmark.report; needs \\usepackage{booktabs}\n"
               + "\n".join(latex(t, labels) for t in tables))
    sweep_plot(tables[0], manifest, out_dir / "sweep.png")
    averages_plot(tables[0], out_dir / "averages.png")
    return out_dir


def make_manifest(plan: Any, store: Store) -> dict[str, Any]:
    return {"suite": plan.suite.name, "runs_dir": str(Path(store.root).resolve()), "measures": plan.measures,
            "columns": list(getattr(plan, "columns", []) or plan.datasets), "groups": dict(getattr(plan, "groups", {})),
            "table": dataclasses.asdict(plan.suite.table) if hasattr(plan.suite, "table") else {},
            "max_docs": getattr(plan, "max_docs", None), "max_queries": getattr(plan, "max_queries", None),
            "dataset_measures": dict(getattr(plan, "dataset_measures", {})),
            "conditions": collect_rows(plan, store)}


def write_suite_results(plan: Any, store: Store, out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = make_manifest(plan, store)
    write_json(out_dir / MANIFEST, manifest)
    return render(plan.suite.name, manifest, Path(store.root), out_dir)


def regenerate(results: Path, suites: Iterable[str] | None = None, runs_dir: Path | None = None) -> list[Path]:
    """Rewrite every table and plot under ``results`` from the manifests and ``runs/``; nothing is recomputed."""
    manifests = sorted(Path(results).glob(f"*/{MANIFEST}"))
    if suites:
        wanted = set(suites)
        unknown = wanted - {m.parent.name for m in manifests}
        if unknown:
            raise BenchmarkError(f"no {MANIFEST} for suite(s) {', '.join(sorted(unknown))} under {results}/; "
                                 f"found: {', '.join(m.parent.name for m in manifests) or 'none'}")
        manifests = [m for m in manifests if m.parent.name in wanted]
    if not manifests:
        raise BenchmarkError(f"no {MANIFEST} under {results}/<suite>/; run `python -m benchmark.run --suite NAME` first")
    done = []
    for path in manifests:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BenchmarkError(f"{path} is not valid JSON ({exc}); rerun its suite to rewrite it") from None
        missing = [k for k in ("suite", "measures", "conditions") + (() if runs_dir else ("runs_dir",))
                   if not isinstance(manifest, dict) or k not in manifest]
        if missing:
            raise BenchmarkError(f"{path} lacks {', '.join(missing)}; " + (
                "pass --runs-dir DIR (the runs folder the suite ran with)" if missing == ["runs_dir"]
                else "it was not written by benchmark.run: rerun its suite to rewrite it"))
        done.append(render(manifest["suite"], manifest, Path(runs_dir or manifest["runs_dir"]), path.parent))
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.report", description="Regenerate tables and plots from runs/.")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--runs-dir", help="default: the one recorded in each manifest")
    p.add_argument("--suite", action="append", help="only these suites (default: every results/<suite>/manifest.json)")
    args = p.parse_args(argv)
    try:
        for out in regenerate(Path(args.results_dir), args.suite, Path(args.runs_dir) if args.runs_dir else None):
            print(f"regenerated {out}")
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
