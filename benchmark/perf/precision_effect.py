"""bf16 encoding against the exact float32 path: the effect on every reported measure, FLOPS and non-zeros.

The GPU suites encode in bfloat16, outside the exact path (float32 gives the canonical impacts on every
encode path; a bf16 forward rounds the hidden states first). This compares two results folders of one
suite that differ only in ``[encode] precision`` (same trained model, same data): per dataset and
measure, float32, bf16, Δ and a paired t-test over queries; and, from the runs folder, how many
quantised impacts differ and by how much.

    python -m benchmark.perf precision-effect --runs-dir RUNS --float32 RESULTS/a --bfloat16 RESULTS/b \
        --out results/precision
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmark.common.atomic import write_csv, write_text
from benchmark.common.environment import machine_class
from benchmark.evaluation.significance import paired_ttest
from benchmark.formats import vectors
from benchmark.report.results import read_results
from benchmark.report.table import short_name
from benchmark.retrieval.impact_vectors import read_query_vectors


def _parents(runs: Path, search_id: str) -> dict[str, str]:
    return json.loads((runs / "search" / search_id / "config.json").read_text())["parents"]


def _doc_vectors(folder: Path) -> dict[str, dict[str, int]]:
    return {row.id: row.vector for row in vectors.read_collection(Path(folder) / vectors.SHARDS)}


def compare_impacts(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, Any]:
    """(text, term) pairs non-zero in either encoding: how many differ, the largest |Δ|, and how many
    are non-zero in only one (a term switched on or off by the precision)."""
    pairs = differ = only = largest = 0
    for key in a.keys() | b.keys():
        va, vb = a.get(key, {}), b.get(key, {})
        for term in va.keys() | vb.keys():
            x, y = va.get(term, 0), vb.get(term, 0)
            pairs += 1
            if x != y:
                differ += 1
                largest = max(largest, abs(x - y))
                only += (x == 0) != (y == 0)
    return {"pairs": pairs, "differ": differ, "only_one": only, "max_abs_delta": largest}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.perf precision-effect", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--float32", type=Path, required=True, help="results folder of the float32 run")
    p.add_argument("--bfloat16", type=Path, required=True, help="results folder of the bfloat16 run")
    p.add_argument("--out", type=Path, default=Path("results/precision"))
    args = p.parse_args(argv)
    exact, bf16 = read_results(args.float32), read_results(args.bfloat16)
    pairs = {}
    for c in exact.conditions:
        if c.system != "splade":
            continue
        other = [o for o in bf16.conditions if (o.dataset, o.row, o.seed) == (c.dataset, c.row, c.seed)]
        assert len(other) == 1 and c.precision == "float32" and other[0].precision == "bfloat16", (c.key, other)
        assert c.train_id == other[0].train_id, "the two runs must share their trained model"
        pairs[c.dataset] = (c, other[0])
    rows: list[dict[str, Any]]  # one per dataset and quantity
    impacts: list[dict[str, Any]]  # one per dataset and side
    rows, impacts = [], []
    for dataset, (a, b) in pairs.items():
        for measure in exact.measures:
            t = paired_ttest(bf16.perquery[b.key][measure], exact.perquery[a.key][measure])
            rows.append(
                {
                    "dataset": dataset,
                    "quantity": measure,
                    "float32": a.metrics[measure],
                    "bfloat16": b.metrics[measure],
                    "delta": b.metrics[measure] - a.metrics[measure],
                    "p_value": t.p_value,
                    "queries": t.queries,
                }
            )
        for name in ("FLOPS", "doc_nnz", "query_nnz"):
            x, y = getattr(a, name), getattr(b, name)
            rows.append(
                {
                    "dataset": dataset,
                    "quantity": name,
                    "float32": x,
                    "bfloat16": y,
                    "delta": y - x,
                    "p_value": "",
                    "queries": "",
                }
            )
        pa, pb = _parents(args.runs_dir, a.search_id), _parents(args.runs_dir, b.search_id)
        for side, load in (
            ("docs", lambda i: _doc_vectors(args.runs_dir / "encode" / i)),
            ("queries", lambda i: read_query_vectors(args.runs_dir / "queries" / i)),
        ):
            impacts.append({"dataset": dataset, "vectors": side, **compare_impacts(load(pa[side]), load(pb[side]))})
    columns = ["dataset", "quantity", "float32", "bfloat16", "delta", "p_value", "queries"]
    write_csv(args.out / "bf16-vs-float32.csv", rows, columns)
    write_csv(
        args.out / "bf16-impacts.csv", impacts, ["dataset", "vectors", "pairs", "differ", "only_one", "max_abs_delta"]
    )
    a0 = next(iter(pairs.values()))[0]
    lines = [
        "# bf16 encoding against the exact float32 path",
        "",
        f"SPLADE {a0.backbone} ({'trained: ' + a0.train_id if a0.trained else 'untrained'}, seed {a0.seed}), the same "
        "model encoded twice, `[encode] precision` float32 (the exact path) and bfloat16 (the GPU suites' setting), "
        "everything else equal. Δ = bf16 − float32; p: two-sided paired t-test over queries (no correction). "
        f"Measured on the CPU ({machine_class()[1]}; torch's CPU bf16 kernels; a GPU's bf16 kernels sum in another "
        f"order, "
        "so GPU impacts differ from these in detail).",
        "",
        "Reproduce: `python -m benchmark.run --suite results/precision/precision-float32.toml --runs-dir R "
        "--results-dir X`, the same with `precision-bfloat16.toml`, then `python -m benchmark.perf precision-effect "
        "--runs-dir R --float32 X/precision-float32 --bfloat16 X/precision-bfloat16`.",
        "",
        "| dataset | quantity | float32 | bf16 | Δ | p |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        p_text = "" if r["p_value"] == "" else f"{r['p_value']:.3f}"
        lines.append(
            f"| {short_name(r['dataset'])} | {r['quantity']} | {r['float32']:.4f} | {r['bfloat16']:.4f} | "
            f"{r['delta']:+.4f} | {p_text} |"
        )
    lines += [
        "",
        "Quantised impacts (round(w·100)), over the (text, term) pairs non-zero in either encoding:",
        "",
        "| dataset | vectors | pairs | differ | non-zero in one only | max abs Δ |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in impacts:
        lines.append(
            f"| {short_name(r['dataset'])} | {r['vectors']} | {r['pairs']:,} | {r['differ']:,} "
            f"({r['differ'] / max(r['pairs'], 1):.1%}) | {r['only_one']:,} | {r['max_abs_delta']} |"
        )
    write_text(args.out / "bf16-vs-float32.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
