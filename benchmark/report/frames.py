"""A results folder as pandas frames, for analysis outside the tables.

``results.json`` keys each condition by its evaluate stage's id, and ``perquery.csv.gz`` keys its
values by that id too: one call joins them, so a reader needs neither the ids nor the layout::

    from benchmark.report.frames import load_results

    frames = load_results("results/smoke")
    frames.scores      # one line per row (system), dataset, measure and seed
    frames.perquery    # one line per row, dataset, seed, measure and query
    frames.versus("SPLADE bert-tiny baseline", "BM25", "nDCG@10")  # per-query wins and losses

Rows are named as the tables name them (``row``: "BM25", "SPLADE bert-tiny baseline (untrained)",
"SPLADE naver/splade-v3 (published)", "mine (run file)") and by ``row_id``, as in ``table.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError
from benchmark.report.labels import row_id, system_label
from benchmark.report.results import ConditionResult, read_results

if TYPE_CHECKING:
    import pandas as pd

#: the columns that name a row, in both frames (``system`` is bm25 | splade | published | run, as in metrics.csv)
ROW_COLUMNS = ["row", "row_id", "system", "backbone", "variant", "trained", "seed", "dataset"]
SCORE_COLUMNS = [
    "suite",
    "subset",
    *ROW_COLUMNS,
    "measure",
    "value",
    "status",
    "outcome",
    "queries",
    "FLOPS",
    "query_nnz",
    "doc_nnz",
    "condition",
]
PERQUERY_COLUMNS = [*ROW_COLUMNS, "measure", "query_id", "value", "condition"]
WIN, LOSS, TIE = "win", "loss", "tie"


def _row(c: ConditionResult) -> dict[str, Any]:
    return {
        "row": system_label(*c.row),
        "row_id": row_id(c.row),
        "system": c.system,
        "backbone": c.backbone,
        "variant": c.variant,
        "trained": c.trained,
        "seed": c.seed,
        "dataset": c.dataset,
    }


@dataclass
class ResultFrames:
    """``scores`` and ``perquery`` of one results folder (see the module's docstring)."""

    scores: pd.DataFrame
    perquery: pd.DataFrame

    def rows(self) -> list[str]:
        """The row labels, in table order."""
        return list(dict.fromkeys(self.scores["row"]))

    def _select(self, name: str) -> pd.DataFrame:
        """The per-query lines of one row, named by its label or its row_id."""
        lines = self.perquery[(self.perquery["row"] == name) | (self.perquery["row_id"] == name)]
        if lines.empty:
            raise BenchmarkError(
                f"no row {name!r} with per-query values; valid: {', '.join(self.rows())} "
                "(a table row's label, or its row_id)"
            )
        return lines

    def versus(self, a: str, b: str, measure: str, dataset: str | None = None) -> pd.DataFrame:
        """Row ``a`` against row ``b``, query by query: one line per dataset and query both were scored on,
        with ``a``, ``b`` (each the mean over the row's seeds, as the tables average seeds), ``delta``
        (a − b) and ``result`` (win, loss or tie for ``a``). ``result.value_counts()`` counts them."""
        import numpy as np
        import pandas as pd

        sides = []
        for side, name in (("a", a), ("b", b)):
            lines = self._select(name)
            lines = lines[lines["measure"] == measure]
            if dataset is not None:
                lines = lines[lines["dataset"] == dataset]
            if lines.empty:
                measures = sorted(set(self._select(name)["measure"]))
                raise BenchmarkError(
                    f"row {name!r} has no per-query {measure!r}"
                    + (f" on {dataset!r}" if dataset is not None else "")
                    + f"; its measures: {', '.join(measures)}"
                )
            sides.append(lines.groupby(["dataset", "query_id"], sort=True)["value"].mean().rename(side))
        out = pd.concat(sides, axis=1, join="inner").reset_index()
        out["delta"] = out["a"] - out["b"]
        out["result"] = np.select([out["delta"] > 0, out["delta"] < 0], [WIN, LOSS], TIE)
        out.attrs.update({"a": a, "b": b, "measure": measure})
        return out


def load_results(folder: str | Path) -> ResultFrames:
    """The frames of a results folder (``results/<suite>``); a missing or damaged file is one line."""
    import pandas as pd

    results = read_results(Path(folder))
    measures_of = results.dataset_measures
    scores = []
    for c in results.conditions:
        for measure in dict.fromkeys([*measures_of.get(c.dataset, results.measures), *c.metrics]):
            scores.append(
                {
                    "suite": results.suite,
                    "subset": results.subset or "",
                    **_row(c),
                    "measure": measure,
                    "value": c.metrics.get(measure) if c.scored else None,
                    "status": c.state,
                    "outcome": c.outcome,
                    "queries": c.queries,
                    "FLOPS": c.FLOPS,
                    "query_nnz": c.query_nnz,
                    "doc_nnz": c.doc_nnz,
                    "condition": c.key,
                }
            )
    perquery: list[dict[str, Any]] = []
    for c in results.conditions:
        for measure, values in sorted(results.perquery.get(c.key, {}).items()):
            row = _row(c)
            perquery.extend(
                {**row, "measure": measure, "query_id": qid, "value": value, "condition": c.key}
                for qid, value in sorted(values.items())
            )
    frames = ResultFrames(pd.DataFrame(scores, columns=SCORE_COLUMNS), pd.DataFrame(perquery, columns=PERQUERY_COLUMNS))
    for frame in (frames.scores, frames.perquery):
        frame["seed"] = frame["seed"].astype("Int64")  # absent for untrained rows, BM25 and run files
        frame["value"] = frame["value"].astype("float64")
    return frames
