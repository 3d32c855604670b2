"""Results: ``results/<suite>/metrics.csv`` (long format), ``table.md``, and the manifest that lets
``python -m benchmark.report`` regenerate them from ``runs/`` without recomputing anything."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError
from benchmark.stage import Store, write_json, write_text

MANIFEST = "manifest.json"
METRIC_COLUMNS = ["suite", "dataset", "system", "backbone", "variant", "factor", "trained", "measure", "value",
                  "status", "evaluate_id", "train_id"]


def system_label(row: dict[str, Any]) -> str:
    if row["system"] == "bm25":
        return "BM25"
    label = f"SPLADE {row['backbone']} {row['variant']}"
    return label if row["trained"] else f"{label} (untrained)"


def collect_rows(plan: Any, store: Store) -> list[dict[str, Any]]:
    """One manifest row per condition, with its status: ok, collapsed, or missing."""
    rows = []
    for cond in plan.conditions:
        status = "ok"
        train_meta = store.load(cond.train) if cond.train is not None else None
        if train_meta is not None and train_meta["record"].get("status") == "collapsed":
            status = "collapsed"
        elif store.load(cond.evaluate) is None:
            status = "missing"
        rows.append({**cond.row(), "status": status, "evaluate_id": cond.evaluate.id,
                     "train_id": cond.train.id if cond.train is not None else ""})
    return rows


def metric_rows(suite: str, manifest_rows: list[dict[str, Any]], measures: list[str], runs: Path) -> list[dict[str, Any]]:
    out = []
    for row in manifest_rows:
        metrics: dict[str, float] = {}
        if row["status"] == "ok":
            meta = json.loads((runs / "evaluate" / row["evaluate_id"] / "config.json").read_text(encoding="utf-8"))
            metrics = meta["record"]["metrics"]
        for measure in measures:
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


def markdown_table(rows: list[dict[str, Any]], measure: str) -> str:
    """Systems × datasets for one measure; a collapsed run reads 'collapsed', never 0."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    systems = list(dict.fromkeys(system_label(r) for r in rows))
    cell: dict[tuple[str, str], str] = {}
    for r in rows:
        if r["measure"] != measure:
            continue
        cell[(system_label(r), r["dataset"])] = r["value"] if r["status"] == "ok" else r["status"]
    lines = [f"| {measure} | " + " | ".join(datasets) + " |", "|---|" + "---:|" * len(datasets)]
    for s in systems:
        lines.append(f"| {s} | " + " | ".join(cell.get((s, d), "") for d in datasets) + " |")
    return "\n".join(lines) + "\n"


def render(suite: str, manifest: dict[str, Any], runs: Path, out_dir: Path) -> Path:
    measures = manifest["measures"]
    rows = metric_rows(suite, manifest["conditions"], measures, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "metrics.csv", to_csv(rows, METRIC_COLUMNS))
    md = [f"# {suite}\n"] + [markdown_table(rows, m) + "\n" for m in measures]
    write_text(out_dir / "table.md", "\n".join(md))
    return out_dir


def write_suite_results(plan: Any, store: Store, results_dir: Path) -> Path:
    out_dir = Path(results_dir) / plan.suite.name
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"suite": plan.suite.name, "runs_dir": str(Path(store.root).resolve()), "measures": plan.measures,
                "conditions": collect_rows(plan, store)}
    write_json(out_dir / MANIFEST, manifest)
    timings = [{"stage": sid.split("-")[0], "id": sid, "seconds": f"{sec:.2f}"} for sid, sec in store.timings.items()]
    write_text(out_dir / "timings.csv", to_csv(timings, ["stage", "id", "seconds"]))
    return render(plan.suite.name, manifest, Path(store.root), out_dir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.report", description="Regenerate tables from runs/.")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--runs-dir", help="default: the one recorded in each manifest")
    p.add_argument("--suite", action="append", help="only these suites (default: every results/<suite>/manifest.json)")
    args = p.parse_args(argv)
    try:
        results = Path(args.results_dir)
        manifests = sorted(results.glob(f"*/{MANIFEST}"))
        if args.suite:
            manifests = [m for m in manifests if m.parent.name in args.suite]
        if not manifests:
            raise BenchmarkError(f"no {MANIFEST} under {results}/<suite>/; run `python -m benchmark.run --suite NAME` first")
        for path in manifests:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            runs = Path(args.runs_dir or manifest["runs_dir"])
            print(f"regenerated {render(manifest['suite'], manifest, runs, path.parent)}")
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
