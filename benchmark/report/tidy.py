"""The tidy CSVs: ``metrics.csv`` (one line per condition, seed and measure: every number a table
shows comes from these) and ``table.csv`` (one line per table cell)."""

from __future__ import annotations

from typing import Any

from benchmark.report.labels import row_id
from benchmark.report.results import SuiteResults, efficiency
from benchmark.report.table import EFFICIENCY, SPARSITY, Table
from benchmark.report.text import steps

METRIC_COLUMNS = [
    "suite",
    "dataset",
    "system",
    "backbone",
    "variant",
    "factor",
    "trained",
    "measure",
    "value",
    "status",
    "evaluate_id",
    "train_id",
    "subset",
    "method",
    "seed",
    "outcome",
    "outcome_reason",
    "outcome_step",
    "stopped_early",
    "queries",
    "FLOPS",
    "query_nnz",
    "doc_nnz",
    "scale",
    "head_norm_before",
    "head_norm_after",
    "search_ms",
    "index_bytes",
]  # the first twelve as before, so readers of the
# earlier columns keep working; search_ms and index_bytes come from stages.csv
TABLE_COLUMNS = [
    "table",
    "row",
    "row_id",
    "system",
    "backbone",
    "variant",
    "trained",
    "column",
    "kind",
    "measure",
    "value",
    "sd",
    "seeds",
    "of",
    "delta",
    "p_value",
    "p_holm",
    "significant",
    "p_bm25",
    "p_bm25_holm",
    "significant_bm25",
    "best",
    "partial",
    "status",
    "outcomes",
    "collapse_steps",
    "FLOPS",
    "query_nnz",
    "doc_nnz",
    "test",
    "p_query",
    "search_ms",
    "index_bytes",
    "flags",
]


def exact(x: float | None) -> str:
    """Shortest text that reads back as the same float: averages computed from it are the table's."""
    return "" if x is None else repr(float(x))


def metric_rows(results: SuiteResults) -> list[dict[str, Any]]:
    out = []
    costs = efficiency(results)
    for c in results.conditions:
        for measure in results.dataset_measures.get(c.dataset, results.measures):
            value = c.metrics.get(measure) if c.scored else None
            out.append(
                {
                    "suite": results.suite,
                    "subset": results.subset or "",
                    "dataset": c.dataset,
                    "system": c.system,
                    "backbone": c.backbone,
                    "variant": c.variant,
                    "factor": c.factor,
                    "method": c.method,
                    "trained": c.trained,
                    "seed": "" if c.seed is None else c.seed,
                    "measure": measure,
                    "value": exact(value),
                    "status": c.state,
                    "outcome": c.outcome,
                    "outcome_reason": c.outcome_reason,
                    "outcome_step": "" if c.outcome_step is None else c.outcome_step,
                    "stopped_early": c.stopped_early,
                    "queries": "" if c.queries is None else c.queries,
                    "FLOPS": exact(c.FLOPS),
                    "query_nnz": exact(c.query_nnz),
                    "doc_nnz": exact(c.doc_nnz),
                    "scale": exact(c.scale),
                    "head_norm_before": exact(c.head_norm_before),
                    "head_norm_after": exact(c.head_norm_after),
                    "evaluate_id": c.evaluate_id,
                    "train_id": c.train_id,
                    "search_ms": exact(costs[c.key]["search_ms"]),
                    "index_bytes": "" if (b := costs[c.key]["index_bytes"]) is None else int(b),
                }
            )
    return out


def table_rows(table: Table) -> list[dict[str, Any]]:
    def fmt(x: float | None) -> str:  # scores to 6 decimals, p-values to 6 significant digits
        return "" if x is None else f"{x:.6f}"

    def fmt_p(x: float | None) -> str:
        return "" if x is None else f"{x:.6g}"

    out = []
    if table.efficiency:  # FLOPS and non-zeros per dataset, no score
        for row in table.rows:
            for dataset in table.sparsity:
                sparse = table.sparse.get((row, dataset), {})
                out.append(
                    {
                        "table": table.title,
                        "row": table.info[row].label,
                        "row_id": row_id(row),
                        "system": row[0],
                        "backbone": row[1],
                        "variant": row[2],
                        "trained": row[3],
                        "column": dataset,
                        "kind": "efficiency",
                        "outcomes": table.info[row].mark,
                        **{s: "" if sparse.get(s) is None else f"{sparse[s]:.6g}" for s in (*SPARSITY, *EFFICIENCY)},
                    }
                )
        return out
    for row in table.rows:
        info = table.info[row]
        for col in table.columns:
            cell = table.cells[(row, col.name)]
            sparse = table.sparse.get((row, col.name), {})
            out.append(
                {
                    "table": table.title,
                    "row": info.label,
                    "row_id": row_id(row),
                    "system": row[0],
                    "backbone": row[1],
                    "variant": row[2],
                    "trained": row[3],
                    "column": col.name,
                    "kind": col.kind,
                    "measure": col.measure,
                    "value": fmt(cell.value),
                    "sd": fmt(cell.sd),
                    "seeds": cell.seeds if col.kind != "average" else "",
                    "of": cell.of if col.kind != "average" else "",
                    "delta": fmt(cell.delta),
                    "p_value": fmt_p(cell.p_value),
                    "p_holm": fmt_p(cell.p_holm),
                    "significant": cell.significant,
                    "p_bm25": fmt_p(cell.p_bm25),
                    "p_bm25_holm": fmt_p(cell.p_bm25_holm),
                    "significant_bm25": cell.significant_bm25,
                    "best": cell.best,
                    "partial": cell.partial,
                    "status": cell.status,
                    "outcomes": info.mark,
                    "collapse_steps": steps(cell.steps),
                    **{s: "" if sparse.get(s) is None else f"{sparse[s]:.6g}" for s in (*SPARSITY, *EFFICIENCY)},
                    "test": cell.test,
                    "p_query": fmt_p(cell.p_query),
                    "flags": ";".join(cell.flags),
                }
            )
    return out
