"""The table model: rows are systems, columns datasets, groups and averages; cells are seed means with
their Δ to the same backbone's baseline and a Holm-corrected paired t-test.

A row is (system, backbone, variant, trained) and gathers every seed. A cell's value is the mean over
seeds of that seed's value (a group's: the mean over its members), with the sample sd over seeds.
The dagger tests the row against its baseline over queries (one seed) or over seeds (several; see
``benchmark.evaluation.significance``), Holm-corrected over every test of the table. A run stopped at its collapse
has no score: its cell reads "collapsed" (never 0). A run
that trained to its end keeps its score; its row carries the outcome ("collapsed", "1/3 degraded").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from benchmark.pipeline.systems import system
from benchmark.report.judgements import judge, lost_key, marks
from benchmark.report.labels import baseline_of, bm25_of, system_label
from benchmark.report.results import ConditionResult, RowKey, SuiteResults, outcome_counts
from benchmark.training.outcomes import COLLAPSED, DEGRADED, MISSING, OK

SUBSET_MEAN = "mean over shown"
DAGGER = "†"  # significant against the same backbone's baseline
DDAGGER = "‡"  # significant against BM25
#: a value computed from a flagged run: a query whose summed impacts passed 2^24 (float32 scores round there)
FLAG = "§"
PAST_FLOAT32 = "past_float32"
QUERY_TEST = "paired t-test over queries"
SEED_TEST = "paired t-test over seeds"
PARTIAL = "*"

#: Column labels for well-known datasets; BEIR ids fall back to their dataset name.
SHORT_NAMES = {
    "msmarco-passage/dev/small": "MS MARCO dev",
    "msmarco-passage/trec-dl-2019/judged": "DL19",
    "msmarco-passage/trec-dl-2020/judged": "DL20",
    "beir/cqadupstack": "CQADupStack",
    "beir/webis-touche2020/v2": "Touché-2020",
}
SPARSITY = ("FLOPS", "query_nnz", "doc_nnz")
#: efficiency from the run's stage log (stages.csv): the search stage's wall time per query, the index's size
EFFICIENCY = ("search_ms", "index_bytes")
SPARSITY_LABELS = {
    "FLOPS": "FLOPS",
    "query_nnz": "q nnz",
    "doc_nnz": "d nnz",
    "search_ms": "ms/q",
    "index_bytes": "index MiB",
}
MAX_SPARSITY_DATASETS = 1  # FLOPS and non-zeros beside the score (the sweep); more datasets: their own table


@dataclass(frozen=True)
class Column:
    name: str  # dataset id, group name, or average name
    kind: str  # dataset | group | average
    measure: str
    members: tuple[str, ...] = ()  # a group's datasets, an average's columns


@dataclass
class Cell:
    status: str  # ok (has a value) | collapsed (no value: every run stopped at its collapse) | missing
    value: float | None = None
    sd: float | None = None  # sample sd over seeds, with 2 or more
    seeds: int = 0  # seeds averaged into the value
    of: int = 0  # seeds the row has (a cell with fewer is marked n=seeds/of)
    steps: tuple[int, ...] = ()  # collapse steps of runs stopped early (status collapsed)
    delta: float | None = None
    p_value: float | None = None  # of the test the dagger uses (``test``)
    p_holm: float | None = None  # Holm-adjusted over every tested cell of the table
    test: str = ""  # QUERY_TEST (one seed) or SEED_TEST (several)
    p_query: float | None = None  # the per-query test on seed-averaged scores, shown for reference
    significant: bool = False
    p_bm25: float | None = None  # the same test against BM25 on the same queries
    p_bm25_holm: float | None = None
    significant_bm25: bool = False
    best: bool = False
    partial: bool = False  # an average that left out columns without a score
    untested: bool = False  # a Δ without a test: no per-query values recorded
    flags: tuple[str, ...] = ()  # the conditions of the runs behind the value that the notes name (PAST_FLOAT32)


@dataclass
class Row:
    key: RowKey
    label: str
    seeds: list[int | None]
    outcomes: dict[str, int]  # training outcome → seeds
    mark: str  # "", "collapsed", "degraded", "1/3 collapsed, 1/3 degraded", "2/3 degraded vs reference"
    runs: list[ConditionResult]  # every condition of the row, in suite order
    judgements: list[Any] = field(default_factory=list)  # benchmark.report.judgements.Judgement, against other rows


@dataclass
class Table:
    title: str
    measure: str | None  # the single measure of every column, None when columns differ
    columns: list[Column]
    rows: list[RowKey]
    info: dict[RowKey, Row]
    cells: dict[tuple[RowKey, str], Cell]
    alpha: float
    digits: int
    sparsity: list[str] = field(default_factory=list)  # datasets whose FLOPS and non-zeros show beside the score
    sparse: dict[tuple[RowKey, str], dict[str, float | None]] = field(default_factory=dict)
    sparse_names: list[str] = field(default_factory=list)  # of SPARSITY + EFFICIENCY, those some row has
    legend: list[str] = field(default_factory=list)  # the symbols' key, short, under the table; ``notes`` in full
    notes: list[str] = field(default_factory=list)
    declared_averages: list[str] = field(default_factory=list)  # the suite's own averages (for the subset note)
    efficiency: bool = False  # FLOPS and non-zeros only: no score columns (a multi-dataset table's efficiency)
    # (row, column) → (the suite's expected score, its --check verdict), shown beside the score as on 2CR's pages
    references: dict[tuple[RowKey, str], tuple[str, str]] = field(default_factory=dict)

    @property
    def labels(self) -> dict[RowKey, str]:
        return {r: self.info[r].label for r in self.rows}


def slots(table: Table) -> list[tuple[str, Any]]:
    """The table's cells left to right: ("value", Column), then ("sparse", dataset) for the FLOPS and
    non-zeros beside it; an efficiency table has only the latter."""
    if table.efficiency:
        return [("sparse", d) for d in table.sparsity]
    out: list[tuple[str, Any]] = []
    for col in table.columns:
        out.append(("value", col))
        if col.name in table.sparsity:
            out.append(("sparse", col.name))
    return out


def short_name(dataset: str, labels: dict[str, str] | None = None) -> str:
    if labels and dataset in labels:
        return labels[dataset]
    if dataset in SHORT_NAMES:
        return SHORT_NAMES[dataset]
    if dataset.startswith("beir/"):
        return dataset.split("/")[1]
    if dataset.startswith("local:"):
        return dataset[len("local:") :]
    if dataset.startswith(("/", ".", "~")):  # a local BEIR folder: its name, and the split if not test
        folder, _, split = dataset.partition("@")
        return Path(folder).name + (f"@{split}" if split else "")
    return dataset


def outcome_mark(counts: dict[str, int]) -> str:
    """ "collapsed" for a single run; "1/3 collapsed, 1/3 degraded" over seeds; "" when all are ok."""
    n = sum(counts.values())
    parts = []
    for outcome in (COLLAPSED, DEGRADED):
        k = counts.get(outcome, 0)
        if k:
            parts.append(outcome if n == 1 else f"{k}/{n} {outcome}")
    return ", ".join(parts)


def _rescale_tag(c: ConditionResult) -> str:
    """The backbone stage's own account, else (results written before it) the planned method and factor."""
    if c.rescale or not c.method or not system(c.system).trains:
        return c.rescale
    from benchmark.model.rescale import rescale_tag

    return rescale_tag(c.method, c.factor)


def build_rows(results: SuiteResults) -> dict[RowKey, Row]:
    rows: dict[RowKey, list[ConditionResult]] = {}
    for c in results.conditions:
        rows.setdefault(c.row, []).append(c)
    out = {}
    for key, runs in rows.items():
        counts = outcome_counts(runs) if key[3] else {}
        seeds = list(dict.fromkeys(c.seed for c in runs))
        tag = next((_rescale_tag(c) for c in runs if _rescale_tag(c)), "")  # how the head was rescaled: one per row
        label = system_label(*key) + (f" [{tag}]" if tag else "")
        out[key] = Row(key, label, seeds, counts, outcome_mark(counts), runs)
    for key, judged in judge(results, out).items():
        row = out[key]
        row.judgements = judged
        row.mark = ", ".join(m for m in (row.mark, *marks(judged, len(row.seeds))) if m)
    return out


# --------------------------------------------------------------------------- cells


def _seed_values(row: Row, datasets: tuple[str, ...], measure: str) -> tuple[dict[Any, float], list[int]]:
    """seed → that seed's value (the mean over ``datasets``, all needed), and the steps of stopped runs."""
    by_seed: dict[Any, dict[str, ConditionResult]] = {}
    for c in row.runs:
        if c.dataset in datasets:
            by_seed.setdefault(c.seed, {})[c.dataset] = c
    values: dict[Any, float] = {}
    steps: list[int] = []
    for seed, runs in by_seed.items():
        if any(r.stopped_early for r in runs.values()):
            steps.extend(
                sorted({r.outcome_step for r in runs.values() if r.stopped_early and r.outcome_step is not None})
            )
            continue
        parts = [runs[d].metrics.get(measure) if d in runs and runs[d].scored else None for d in datasets]
        if all(p is not None for p in parts):
            values[seed] = sum(parts) / len(parts)  # type: ignore[arg-type]
    return values, steps


def _flags(row: Row, datasets: tuple[str, ...]) -> tuple[str, ...]:
    """The flagged conditions of the scored runs behind a value (each named under the table)."""
    return (PAST_FLOAT32,) if any(c.past_float32 for c in row.runs if c.dataset in datasets and c.scored) else ()


def _cell(row: Row, datasets: tuple[str, ...], measure: str) -> Cell:
    values, steps = _seed_values(row, datasets, measure)
    of = len(row.seeds)
    if values:
        xs = list(values.values())
        sd = statistics.stdev(xs) if len(xs) >= 2 else None
        return Cell(OK, statistics.fmean(xs), sd, len(xs), of, flags=_flags(row, datasets))
    if steps or any(c.stopped_early for c in row.runs if c.dataset in datasets):
        return Cell(COLLAPSED, of=of, steps=tuple(sorted(set(steps))))
    return Cell(MISSING, of=of)


def _perquery(
    results: SuiteResults, row: Row, datasets: tuple[str, ...], measure: str, pooled: bool
) -> dict[str, float] | None:
    """Per-query scores averaged over the row's scored seeds; a group pools its members' queries."""
    values, _ = _seed_values(row, datasets, measure)
    per_seed = []
    for seed in values:
        merged: dict[str, float] = {}
        for c in row.runs:
            if c.seed != seed or c.dataset not in datasets:
                continue
            scores = results.perquery.get(c.key, {}).get(measure)
            if scores is None:
                return None
            merged.update({f"{c.dataset}\t{q}": v for q, v in scores.items()} if pooled else scores)
        per_seed.append(merged)
    if not per_seed:
        return None
    common = set(per_seed[0]).intersection(*per_seed[1:])
    return {q: statistics.fmean(p[q] for p in per_seed) for q in common}


def _test(results: SuiteResults, row: Row, ref: Row, col: Column, ttest: Callable[..., Any]) -> float | None:
    """The paired t-test's p-value of ``row`` against ``ref`` on one column; None without per-query values."""
    datasets = col.members or (col.name,)
    a = _perquery(results, row, datasets, col.measure, bool(col.members))
    b = _perquery(results, ref, datasets, col.measure, bool(col.members))
    return None if a is None or b is None else ttest(a, b).p_value


def _combine(parts: list[Cell]) -> Cell:
    """An average over columns: a missing column makes it missing; columns without a score are left out."""
    if not parts or any(p.status == MISSING for p in parts):
        return Cell(MISSING)
    ok = [p.value for p in parts if p.status == OK]
    if not ok:
        return Cell(COLLAPSED)
    flags = tuple(dict.fromkeys(f for p in parts if p.status == OK for f in p.flags))
    return Cell(OK, sum(ok) / len(ok), partial=len(ok) < len(parts), flags=flags)  # type: ignore[arg-type]


def build_table(
    results: SuiteResults,
    measure_for: Callable[[str], str | None],
    title: str,
    settings: Any,
    rows: dict[RowKey, Row] | None = None,
) -> Table:
    """The cells of one table; ``measure_for`` gives each dataset/group column its measure (None: no column)."""
    from benchmark.evaluation.significance import holm, paired_ttest, seed_ttest

    rows = rows if rows is not None else build_rows(results)
    groups = results.groups
    names = [n for n in results.column_names() if measure_for(n) is not None]
    columns = [
        Column(n, "group" if n in groups else "dataset", measure_for(n), tuple(groups.get(n, ())))  # type: ignore[arg-type]
        for n in names
    ]
    for avg in settings.averages:
        if all(d in names for d in avg.datasets):  # an average over a subset would mislead: leave it out
            measures = cast("set[str]", {measure_for(d) for d in avg.datasets})  # in names: each has a measure
            columns.append(
                Column(avg.name, "average", measures.pop() if len(measures) == 1 else "mixed", tuple(avg.datasets))
            )
    if (
        settings.averages
        and not any(c.kind == "average" for c in columns)
        and len(names) >= 2
        and len({measure_for(n) for n in names}) == 1
    ):
        # a subset of a suite with averages (two BEIR datasets of BEIR-13): the mean of what is shown,
        # named as such, never under the suite's average's name
        columns.append(Column(f"{SUBSET_MEAN} ({len(names)} datasets)", "average", measure_for(names[0]), tuple(names)))  # type: ignore[arg-type]

    keys = list(rows)
    cells: dict[tuple[RowKey, str], Cell] = {}
    for key in keys:
        for col in columns:
            if col.kind != "average":
                cells[(key, col.name)] = _cell(rows[key], col.members or (col.name,), col.measure)

    base: Cell | None
    tested: list[Cell] = []  # Δ and significance against the same backbone's baseline, Holm over the table
    for key in keys:
        ref = baseline_of(key, rows)
        if ref is None:
            continue
        for col in columns:
            if col.kind == "average":
                continue
            cell, base = cells[(key, col.name)], cells[(ref, col.name)]
            if cell.status == OK and base.status == OK:
                cell.delta = cell.value - base.value  # type: ignore[operator]
                datasets = col.members or (col.name,)
                a = _perquery(results, rows[key], datasets, col.measure, bool(col.members))
                b = _perquery(results, rows[ref], datasets, col.measure, bool(col.members))
                if a is not None and b is not None:
                    cell.p_query = paired_ttest(a, b).p_value
                seeds_a, seeds_b = (_seed_values(rows[k], datasets, col.measure)[0] for k in (key, ref))
                if len(set(seeds_a) & set(seeds_b) - {None}) >= 2:  # several seeds: the seed is the unit
                    cell.p_value, cell.test = seed_ttest(seeds_a, seeds_b).p_value, SEED_TEST
                elif cell.p_query is not None:
                    cell.p_value, cell.test = cell.p_query, QUERY_TEST
                if cell.p_value is not None:
                    tested.append(cell)
                else:
                    cell.untested = True
    for cell, adjusted in zip(tested, holm([c.p_value for c in tested])):  # type: ignore[misc]
        cell.p_holm = adjusted
        cell.significant = adjusted < settings.alpha

    for key in keys:  # the same test against BM25 (the paper's first reference), Holm over the row
        ref = bm25_of(key, rows)
        if ref is None:
            continue
        tested = []
        for col in columns:
            if col.kind == "average":
                continue
            cell, base = cells[(key, col.name)], cells[(ref, col.name)]
            if cell.status == OK and base.status == OK:
                p = _test(results, rows[key], rows[ref], col, paired_ttest)
                if p is not None:
                    cell.p_bm25 = p
                    tested.append(cell)
        for cell, adjusted in zip(tested, holm([c.p_bm25 for c in tested])):  # type: ignore[misc]
            cell.p_bm25_holm = adjusted
            cell.significant_bm25 = adjusted < settings.alpha

    for key in keys:
        for col in columns:
            if col.kind == "average":
                cells[(key, col.name)] = _combine([cells[(key, m)] for m in col.members])
    for key in keys:
        ref = baseline_of(key, rows)
        for col in columns:
            cell = cells[(key, col.name)]
            base = cells.get((ref, col.name)) if ref is not None else None
            if (
                col.kind == "average"
                and base is not None
                and cell.status == base.status == OK
                and not (cell.partial or base.partial)
            ):
                cell.delta = cell.value - base.value  # type: ignore[operator]

    for col in columns:  # bold: the best shown value of the column, when there is something to compare
        shown = {
            k: round(cast(float, cells[(k, col.name)].value), settings.digits)  # status OK: has a value
            for k in keys
            if cells[(k, col.name)].status == OK and not cells[(k, col.name)].partial
        }
        if len(set(shown.values())) >= 2:
            top = max(shown.values())
            for k, v in shown.items():
                cells[(k, col.name)].best = v == top

    measures = {c.measure for c in columns}
    table = Table(
        title,
        measures.pop() if len(measures) == 1 else None,
        columns,
        keys,
        rows,
        cells,
        settings.alpha,
        settings.digits,
        declared_averages=[a.name for a in settings.averages],
    )
    return table


def add_sparsity(
    table: Table, datasets: list[str] | None = None, efficiency: dict[str, dict[str, float | None]] | None = None
) -> None:
    """FLOPS and non-zeros beside the score (the sweep: scale versus density), and from ``efficiency``
    (``benchmark.report.results.efficiency``: condition key → search ms per query, index bytes) the
    cost beside the effectiveness, as seed means; a quantity no row has gets no column."""
    datasets = datasets if datasets is not None else [c.name for c in table.columns if c.kind == "dataset"]
    if not datasets or (not table.efficiency and len(datasets) > MAX_SPARSITY_DATASETS):
        return
    efficiency = efficiency or {}

    def value(c: ConditionResult, name: str) -> float | None:
        return getattr(c, name) if name in SPARSITY else efficiency.get(c.key, {}).get(name)

    sparse: dict[tuple[RowKey, str], dict[str, float | None]] = {}
    for key in table.rows:
        for dataset in datasets:
            runs = [c for c in table.info[key].runs if c.dataset == dataset and c.scored]
            sparse[(key, dataset)] = {
                name: statistics.fmean(vals)
                if (vals := [v for c in runs if (v := value(c, name)) is not None])
                else None
                for name in (*SPARSITY, *EFFICIENCY)
            }
    flops = any(v.get("FLOPS") is not None for v in sparse.values())  # non-zeros go with FLOPS (impact runs)
    names = [
        n
        for n in (*SPARSITY, *EFFICIENCY)
        if (flops or n in EFFICIENCY) and any(v.get(n) is not None for v in sparse.values())
    ]
    if not names:
        return
    table.sparsity, table.sparse, table.sparse_names = datasets, sparse, names


# --------------------------------------------------------------------------- notes


def efficiency_table(headline: Table, efficiency: dict[str, dict[str, float | None]] | None = None) -> Table | None:
    """FLOPS, non-zeros, search time and index size per dataset in their own table, when a headline has
    several datasets: the headline keeps to its measure and fits a screen."""
    datasets = [c.name for c in headline.columns if c.kind == "dataset"]
    if len(datasets) <= MAX_SPARSITY_DATASETS:
        return None
    title = headline.title.rsplit(": ", 1)[0] + ": efficiency"
    table = Table(title, None, [], headline.rows, headline.info, {}, headline.alpha, headline.digits, efficiency=True)
    add_sparsity(table, datasets, efficiency)
    if table.sparsity:
        table.title += " (" + ", ".join(SPARSITY_LABELS[n] for n in table.sparse_names) + ")"
    return table if table.sparsity else None


def mark_tests(table: Table) -> dict[str, str]:
    """What each significance mark of ``table`` means: its test, its unit of observation and its Holm
    family, as the cells were actually tested (a sweep's dagger is over seeds, its double dagger over
    queries on seed-averaged scores)."""
    cells = [table.cells[(r, c.name)] for r in table.rows for c in table.columns]
    n = sum(1 for c in table.columns if c.kind != "average")
    multi = any(len(table.info[r].seeds) > 1 for r in table.rows)
    out = {}
    tested = {c.test for c in cells if c.p_holm is not None}
    if tested:
        family = sum(1 for c in cells if c.p_holm is not None)
        arms = len({r for r in table.rows for c in table.columns if table.cells[(r, c.name)].p_holm is not None})
        how = {
            QUERY_TEST: "a two-sided paired t-test over queries (unit: a query)",
            SEED_TEST: "a two-sided paired t-test over seeds (unit: a seed's score, paired by seed; the seed-to-seed "
            "variance counts)",
        }
        out[DAGGER] = (
            f"{' or '.join(how[t] for t in sorted(tested))}, Holm-corrected over the table's {family} "
            f"test(s) ({arms} arm(s) against their baseline on {n} dataset(s))"
        )
    if any(c.p_bm25 is not None for c in cells):
        unit = "unit: a query, its score averaged over the row's seeds; BM25 has no seed" if multi else "unit: a query"
        out[DDAGGER] = f"a two-sided paired t-test over queries ({unit}), Holm-corrected over the row's {n} dataset(s)"
    return out


def notes(table: Table, results: SuiteResults) -> list[str]:
    cells = [table.cells[(r, c.name)] for r in table.rows for c in table.columns]
    out = []
    multi = any(len(table.info[r].seeds) > 1 for r in table.rows)
    tests = mark_tests(table)
    if any(c.delta is not None for c in cells):
        text = "In parentheses: Δ to the same backbone's baseline (same training)."
        if DAGGER in tests:
            text += f" {DAGGER}: significant at α = {table.alpha:g} against that baseline by {tests[DAGGER]}."
        if multi:
            text += (
                " With several seeds, Δ is between seed means; a per-query test on seed-averaged scores would "
                "ignore the seed variance, so it is not the dagger (table.csv keeps its p as p_query)."
            )
        out.append(text)
    if DDAGGER in tests:
        out.append(
            f"{DDAGGER}: significant at α = {table.alpha:g} against BM25 by {tests[DDAGGER]}. p-values of both "
            "tests: the significance table of the page, and table.csv."
        )
    if any(c.untested for c in cells):
        out.append(
            "No dagger where per-query values were not recorded (results converted from aggregates): "
            "those differences are untested."
        )
    if any(c.sd is not None for c in cells):
        out.append("±: sample standard deviation over seeds.")
    if any(c.status == OK and c.seeds < c.of for c in cells):
        out.append("n=k/m: the mean over the k of the row's m seeds that have a score.")
    if any(c.best for c in cells):
        out.append("Bold: best in the column.")
    precision = precision_note(table)
    if precision:
        out.append(precision)
    out.extend(float32_notes(table))
    marked = [table.info[r] for r in table.rows if table.info[r].mark]
    stopped = any(c.status == COLLAPSED for c in cells)
    if marked or stopped:
        out.append(
            "collapsed / degraded after a system: its training run's outcome, by the rule in its train stage "
            '(reasons and steps below); "… vs baseline" / "… vs reference": judged against the same '
            "backbone's baseline arm or the BERT reference (rules below). A run that trained to its end is "
            "evaluated and shown with its score; a run stopped at its collapse has no score and its cells read "
            '"collapsed" with the step, never 0.'
        )
    if any(c.kind == "average" for c in table.columns) and (marked or stopped):
        out.append(
            f"Averages include every score shown, collapsed or degraded runs included; {PARTIAL}: an average "
            "that left out the columns without a score."
        )
    elif any(c.partial for c in cells):
        out.append(f"{PARTIAL}: an average that left out the columns without a score.")
    if any(c.status == MISSING for c in cells):
        out.append("—: not run yet (run the suite to fill it in).")
    for col in table.columns:
        if col.kind == "group":
            out.append(
                f"{short_name(col.name)}: mean over its {len(col.members)} sub-forums, as BEIR reports it; "
                "its significance test pools their queries."
            )
        if col.kind == "average" and col.name.startswith(SUBSET_MEAN + " ("):
            declared = ", ".join(table.declared_averages) or "the suite's averages"
            out.append(
                f"{col.name}: the mean over the {len(col.members)} datasets shown; not {declared}, "
                "which needs every one of its datasets."
            )
    if any(n in table.sparse_names for n in SPARSITY):
        out.append(
            "FLOPS: expected multiplications per query–document dot product, Σ_j p_q(j)·p_d(j); "
            "q nnz / d nnz: mean non-zero terms per query / document as indexed; seed means."
        )
    if any(n in table.sparse_names for n in EFFICIENCY):
        out.append(
            "ms/q: the search stage's wall time over its queries, in milliseconds (one batch of every query "
            "on the run's Lucene threads, opening the index, the exact rescoring of sums past 2^24 and writing "
            "the run included; encoding the queries is a stage of its own, not included): a cost on the machine "
            "that ran it, not a single-query latency; with few queries the stage's fixed costs dominate. index MiB: "
            "the index stage's folder on disk (2^20 bytes). "
            "Both from stages.csv (the stage log: seconds when computed, bytes); seed means."
            + (
                " A row whose label names an engine (· pisa:…, · seismic:…) was searched by that engine in index "
                "and search stages of its own: its ms/q and index MiB are that engine's, the other rows' Lucene's."
                if any(" · " in r.key.variant for r in table.info.values())
                else ""
            )
        )
    out.extend(judgement_notes(table))
    out.append(scope(results))
    for row in marked:
        for c in _outcome_runs(row):
            out.append(f"{row.label}{'' if c.seed is None else f', seed {c.seed}'}: {describe_outcome(c)}.")
        for j in row.judgements:
            if j.verdict:
                where = f" on {short_name(j.dataset)}" if j.dataset else ""
                out.append(
                    f"{row.label}{'' if j.seed is None else f', seed {j.seed}'}: {j.label} "
                    f"({j.reference}){where}: {j.detail}."
                )
    for r in table.rows:  # a collapse that no longer held on the published checkpoint: an event, not the outcome
        seen: set[Any] = set()
        for c in table.info[r].runs:
            if c.outcome == OK and c.outcome_detail.startswith("recovered: ") and c.seed not in seen:
                seen.add(c.seed)
                out.append(
                    f"{table.info[r].label}{'' if c.seed is None else f', seed {c.seed}'}: ok, {c.outcome_detail}."
                )
    return out


def legend(table: Table) -> list[str]:
    """The key to what the cells show, a few words per symbol; ``notes`` says the same in full (the
    tests, each run's outcome, the data), one click away on the page."""
    cells = [table.cells[(r, c.name)] for r in table.rows for c in table.columns]
    out = []
    if any(c.delta is not None for c in cells):
        out.append("(+Δ): vs the same backbone's baseline")
    tested = {c.test for c in cells if c.p_holm is not None}
    if any(c.p_holm is not None for c in cells):
        unit = " or ".join(t.removeprefix("paired t-test ") for t in sorted(tested))
        out.append(f"{DAGGER}: significant vs that baseline (paired t-test {unit}, Holm, α = {table.alpha:g})")
    if any(c.p_bm25 is not None for c in cells):
        out.append(f"{DDAGGER}: significant vs BM25 (over queries, Holm, α = {table.alpha:g})")
    if any(c.sd is not None for c in cells):
        out.append("±: sd over seeds")
    if any(c.status == OK and c.seeds < c.of for c in cells):
        out.append("n=k/m: k of the row's m seeds scored")
    if any(c.best for c in cells):
        out.append("bold: best in the column")
    if any(table.info[r].mark for r in table.rows):
        out.append(
            "[collapsed] / [degraded]: the training run's outcome; [… vs baseline] / [… vs reference]: "
            "judged against another run"
        )
    if any(" lost " in f" {table.info[r].mark}" for r in table.rows):
        out.append(lost_key())
    if any(c.flags for c in cells):
        out.append(f"{FLAG}: computed from a query whose summed impacts passed 2^24 (float32 rounds; notes: Past 2^24)")
    if any(c.status == COLLAPSED for c in cells):
        out.append("collapsed (step N): stopped at its collapse, no score (never 0)")
    if any(c.partial for c in cells):
        out.append(f"{PARTIAL}: an average that leaves out columns without a score")
    if any(c.status == MISSING for c in cells):
        out.append("—: not run yet")
    if any(n in table.sparse_names for n in SPARSITY):
        out.append("FLOPS: Σ_j p_q(j)·p_d(j); q / d nnz: non-zeros per query / document")
    if any(n in table.sparse_names for n in EFFICIENCY):
        out.append("ms/q: search time per query; index MiB: index size")
    return out


def judgement_notes(table: Table) -> list[str]:
    """The rules of the judgements against other runs, and what could not be judged."""
    judged = [j for r in table.rows for j in table.info[r].judgements]
    if not judged:
        return []
    rules = list(dict.fromkeys(f"{j.label}: {j.rule}" for j in judged))
    out = ["Judged against other runs (judgements.csv: every statistic and p-value): " + "; ".join(rules) + "."]
    skipped = [j for j in judged if j.verdict is None]
    if skipped:
        reasons = list(dict.fromkeys(j.detail.removeprefix("not judged: ") for j in skipped))
        out.append(f"{len(skipped)} of {len(judged)} judgement(s) not made: " + "; ".join(reasons) + ".")
    return out


def float32_notes(table: Table) -> list[str]:
    """One line per run whose summed impacts passed 2**24, where Lucene's float32 scores round: what was made
    exact again, and what stays float32's (which documents made the top k)."""
    out = []
    for r in table.rows:
        for c in table.info[r].runs:
            if c.past_float32:
                seed = "" if c.seed is None else f", seed {c.seed}"
                exact = (
                    f"{c.rescored_exactly} rescored to their exact integer dot products"
                    if c.rescored_exactly
                    else "not rescored (the encodings were not kept): their scores and near-ties are float32's"
                )
                out.append(
                    f"Past 2^24: {table.info[r].label}{seed} on {short_name(c.dataset)}: {c.past_float32} "
                    f"quer{'y' if c.past_float32 == 1 else 'ies'} summed impacts beyond 16,777,216, where "
                    f"Lucene's float32 scores round; {exact}. Which documents made the top k was decided in "
                    "float32."
                )
    return out


def precision_note(table: Table) -> str:
    """The encode precision of every SPLADE row: float32 is the exact path (canonical impacts), bf16 is not."""
    by_precision: dict[str, list[str]] = {}
    for r in table.rows:
        for p in dict.fromkeys(c.precision for c in table.info[r].runs if c.precision):  # BM25 and stopped runs: none
            by_precision.setdefault(p, []).append(table.info[r].label)
    if not by_precision:
        return ""
    exact = {"float32": "float32 (the exact path: canonical impacts, the same on every encode path)"}
    if len(by_precision) == 1:
        (p,) = by_precision
        return f"Encoded in {exact.get(p, p)}: every SPLADE row."
    return (
        "Encoded in " + "; ".join(f"{exact.get(p, p)}: {', '.join(labels)}" for p, labels in by_precision.items()) + "."
    )


def _outcome_runs(row: Row) -> list[ConditionResult]:
    """One condition per seed whose training did not end ok."""
    seen: dict[Any, ConditionResult] = {}
    for c in row.runs:
        if c.outcome in (COLLAPSED, DEGRADED) and c.seed not in seen:
            seen[c.seed] = c
    return list(seen.values())


def describe_outcome(c: ConditionResult) -> str:
    text = c.outcome
    if c.outcome_step is not None:
        text += f" at step {c.outcome_step}"
    if c.outcome_reason:
        text += f" ({c.outcome_reason}{': ' + c.outcome_detail if c.outcome_detail else ''})"
    if c.outcome == COLLAPSED:
        text += ", stopped there: no score" if c.stopped_early else ", trained to its end and scored"
    return text


def scope(results: SuiteResults) -> str:
    """Which data the table comes from: the subset, the suite's own slice, and the seeds."""
    from benchmark.suites.adhoc import ADHOC

    if results.suite == ADHOC:
        text = f"Ad hoc: {results.subset} (no suite file; each dataset's measures from its conventions)."
    elif results.subset:
        text = f"Subset: {results.subset} (a narrowed run, not the suite's full datasets)."
    else:
        limits = [
            f"{n} documents per corpus (judged documents kept)" if (n := results.max_docs) else "",
            f"{n} queries per dataset" if (n := results.max_queries) else "",
        ]
        limits = [x for x in limits if x]
        text = "Data: " + " and ".join(limits) + ", as the suite declares." if limits else "Data: the full datasets."
    if results.seeds:
        text += f" Seeds: {', '.join(str(s) for s in results.seeds)}."
    if results.training:
        text += f" {results.training}"
    for dataset, (docs, measures) in sorted(results.unranked.items()):
        text += (
            f" {short_name(dataset)}: its corpus holds {docs} document{'s' if docs != 1 else ''}, no more than the "
            f"depth "
            f"of {', '.join(measures)}, so {'they score' if len(measures) > 1 else 'it scores'} what a system "
            "retrieves at all, not how it ranks (slice with a larger --max-docs to rank)."
        )
    if results.self_hits_removed:
        text += (
            " Self-hits removed (a hit whose id is the query id, Pyserini's --remove-query as in 2CR) on: "
            + ", ".join(short_name(d) for d in results.self_hits_removed)
            + "."
        )
    return text


# --------------------------------------------------------------------------- a suite's tables


def suite_tables(results: SuiteResults) -> list[Table]:
    """The headline table (each dataset's own measure) and one table per measure, without duplicates."""
    settings = results.settings()
    measures = results.measures
    headline = settings.measure or measures[0]
    rows = build_rows(results)
    where = results.suite + (f" @ {results.subset}" if results.subset else "")

    def headline_for(name: str) -> str:
        own = results.measures_of(name)
        return settings.measure_for.get(name) or (headline if headline in own else own[0])

    tables = [build_table(results, headline_for, f"{where}: headline measures", settings, rows)]
    same = all(headline_for(c) == headline for c in results.column_names())
    for measure in measures:
        if same and measure == headline:
            tables[0].title = f"{where}: {measure}"
            continue
        tables.append(
            build_table(
                results,
                cast(
                    "Callable[[str], str | None]", lambda name, m=measure: m if m in results.measures_of(name) else None
                ),
                f"{where}: {measure}",
                settings,
                rows,
            )
        )
    from benchmark.report.results import efficiency as stage_costs

    costs = stage_costs(results)
    add_sparsity(tables[0], efficiency=costs)
    efficiency = efficiency_table(tables[0], costs)
    if efficiency is not None:
        tables.insert(1, efficiency)
    for table in tables:
        table.notes = notes(table, results)
        table.legend = legend(table)
    return tables
