"""Regression checks in the manner of Pyserini's two-click reproductions (2CR).

Each suite lists expected scores (``[[expected]]`` in its TOML) keyed by dataset, system, measure
and the subset they were measured on (``max_docs``/``max_queries``, absent for a full run), so a CI
slice and a full run each meet their own numbers. ``--check`` prints one verdict per entry that
applies to the run:

* ``[OK]``    within the tolerance (0: equal at 4 decimals, the precision of the tables and of 2CR);
* ``[OKish]`` within the looser band (``okish``, default twice the tolerance);
* ``[FAIL]``  anything else: off by more, missing, or collapsed when it should not be (or the reverse);

and exits 1 on any FAIL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from benchmark.pipeline.systems import system
from benchmark.stages.records import EvaluateRecord, parse
from benchmark.stages.store import Store
from benchmark.training.outcomes import COLLAPSED, MISSING

PRECISION = 4  # scores compare at the precision they are published with
VERDICT_OK, VERDICT_OKISH, VERDICT_FAIL = "OK", "OKish", "FAIL"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    what: str  # dataset, system and measure, for the printed line
    detail: str
    got: str = ""  # what was found, alone (the page's column): "0.7805", "0.6592 (mean of 3)", "collapsed"


def grade(observed: float, expected: float, tolerance: float, okish: float | None = None) -> str:
    """OK, OKish or FAIL for ``observed`` against ``expected`` (observed rounded to 4 decimals)."""
    band = 2 * tolerance if okish is None else okish
    diff = abs(round(observed, PRECISION) - expected)
    slack = 10 ** -(PRECISION + 4)  # float noise in the subtraction, far below the published precision
    if diff <= tolerance + slack:
        return VERDICT_OK
    if diff <= band + slack:
        return VERDICT_OKISH
    return VERDICT_FAIL


def _matches(entry: Any, cond: Any, twins: bool = False) -> bool:
    """An entry names a row of its system; it was measured with the reference engine (Lucene), so a row
    searched by another engine (``--engines``) is that row's twin, not another match. With ``twins`` (a run
    without the reference row), an exact engine's twin stands in: the same top-k scores, tested."""
    engine = getattr(cond, "engine", "")
    if engine and not (twins and _exact(engine)):
        return False
    return cond.system == entry.system and system(entry.system).matches(entry, cond)


def _engine_spec(text: str) -> bool:
    from benchmark.common.errors import BenchmarkError
    from benchmark.retrieval import engines

    try:
        engines.choose(text)
    except BenchmarkError:
        return False
    return True


def _exact(engine: str) -> bool:
    from benchmark.retrieval import engines

    return engines.choose(engine).point.exact


def _describe(entry: Any) -> str:
    return system(entry.system).describe(entry)


def not_evaluated(entry: Any, plan: Any) -> bool:
    """An entry for a model this run does not evaluate (a published model ``--published`` left out), or, in a
    run the command line narrowed (``--systems``, ``--backbones``, a row's command), an entry for a row it
    left out."""
    if not system(entry.system).evaluates(entry, getattr(plan, "published", [])):
        return True
    return _rows_narrowed(getattr(plan, "subset", None)) and not any(
        _matches(entry, c, twins=True) for c in plan.conditions
    )


#: the flags that leave rows out (a data cut, --max-docs or --max-queries, keeps every row)
_ROW_FLAGS = re.compile(r"(?:^|[,; ])(?:systems|datasets|backbones|variants|seeds|published|engines|run)=")


def _rows_narrowed(subset: str | None) -> bool:
    """Whether the subset label names a flag that leaves rows out: an entry for a row the run has no
    condition for is then not this run's to judge; in a whole run (or a data cut) it is a FAIL."""
    return bool(subset) and _ROW_FLAGS.search(cast(str, subset)) is not None


def applies(entry: Any, plan: Any) -> bool:
    """Whether ``entry`` was measured on this run's subset and names one of its datasets or groups (and, for
    a published model, one this run evaluates: ``--published`` chooses which are compared)."""
    columns = set(plan.datasets) | set(getattr(plan, "groups", {}))
    if not_evaluated(entry, plan):
        return False
    return entry.dataset in columns and entry.max_docs == plan.max_docs and entry.max_queries == plan.max_queries


@dataclass(frozen=True)
class Observed:
    """One condition as a check sees it, read from a runs folder (``--check``) or a results folder (the page)."""

    collapsed: bool = False  # its training run collapsed
    reason: str = ""
    trained: bool = False  # it has a finished training run
    value: float | None = None  # the entry's measure; None: see ``missing``
    missing: str = ""


def judge(entry: Any, what: str, found: list[list[Observed] | str]) -> Verdict:
    """The verdict on ``entry`` from each of its datasets' conditions (a string: why none was found);
    several seeds of a system are checked on their mean, and all must match the outcome."""
    values: list[float] = []
    for observed in found:
        if isinstance(observed, str):
            return Verdict(VERDICT_FAIL, what, observed, observed)
        for o in observed:
            if entry.collapsed:
                if o.collapsed:
                    continue
                why = (
                    "expected the training run to collapse, but it did not"
                    if o.trained
                    else "expected a collapse, but the training run is missing"
                )
                return Verdict(VERDICT_FAIL, what, why, "not collapsed" if o.trained else "training run missing")
            if o.collapsed:
                why = f"collapsed ({o.reason or 'see the train stage'})"
                return Verdict(VERDICT_FAIL, what, f"{why}; expected {entry.value:.4f}", why)
            if o.value is None:
                return Verdict(VERDICT_FAIL, what, o.missing, o.missing)
            values.append(o.value)
    if entry.collapsed:
        return Verdict(VERDICT_OK, what, "collapsed, as expected", "collapsed")
    observed_mean = sum(values) / len(values)
    verdict = grade(observed_mean, entry.value, entry.tolerance, entry.okish)
    got = f"{observed_mean:.4f}" + (f" (mean of {len(values)})" if len(values) > 1 else "")
    return Verdict(
        verdict,
        what,
        f"expected {entry.value:.4f} ({band(entry)}), got {got}"
        + (f" [{entry.source}]" if entry.source and verdict != VERDICT_OK else ""),
        got,
    )


def band(entry: Any) -> str:
    """``±0.01, okish ±0.03``: the tolerance and, when there is one, the looser band."""
    return f"±{entry.tolerance:g}" + (
        f", okish ±{entry.okish if entry.okish is not None else 2 * entry.tolerance:g}"
        if entry.tolerance or entry.okish
        else ""
    )


def what_line(entry: Any) -> str:
    return f"{entry.dataset:40} {_describe(entry):36} {entry.measure or 'status':12}"


def _named(entry: Any, conditions: list[Any], match: Any = None) -> list[Any]:
    """The conditions ``entry`` names: the reference engine's rows, or where a run has none of them
    (``--engines pisa``), one exact engine's twins, which return the same top-k scores (tested)."""
    match = match or _matches
    found = [c for c in conditions if match(entry, c)]
    if found:
        return found
    twins = [c for c in conditions if match(entry, c, twins=True)]
    return twins if len({_engine_of(c)[1] for c in twins}) <= 1 else []


def _engine_of(c: Any) -> tuple[str, str]:
    """A condition's variant without its engine, and the engine ("" for the reference): a plan's condition
    carries it, a results folder's row ends its label with it (``systems.engine_label``)."""
    if hasattr(c, "engine"):
        return c.variant, c.engine or ""
    variant, _, engine = c.variant.rpartition(" · ")
    return (variant, engine) if variant and _engine_spec(engine) else (c.variant, "")


def _matching(entry: Any, conditions: list[Any], members: list[str], match: Any = None) -> list[list[Any] | str]:
    """Per member dataset, the conditions ``entry`` names (one per seed), or why there are none."""
    out: list[list[Any] | str] = []
    for dataset in members:
        found = _named(entry, [c for c in conditions if c.dataset == dataset], match)
        if not found:
            return [*out, "no such condition in this run (check backbone/variant/trained)"]
        if len({getattr(c, "seed", None) for c in found}) < len(found):
            return [*out, f"ambiguous: matches {len(found)} conditions; add backbone, variant or trained"]
        out.append(found)
    return out


def check_entry(entry: Any, plan: Any, store: Store) -> Verdict:
    """One verdict from the plan's stages in a runs folder."""
    from benchmark.report.results import TrainOutcome

    members = plan.groups.get(entry.dataset, [entry.dataset]) if getattr(plan, "groups", None) else [entry.dataset]
    found: list[list[Observed] | str] = []
    for conds in _matching(entry, plan.conditions, members):
        if isinstance(conds, str):
            found.append(conds)
            break
        observed = []
        for cond in conds:
            train = store.load(cond.train) if cond.train is not None else None
            outcome = TrainOutcome.from_record(train["record"]) if train is not None else None
            collapsed = outcome is not None and outcome.outcome == COLLAPSED
            meta = None if collapsed or entry.collapsed else store.load(cond.evaluate)
            value = parse(meta, EvaluateRecord).metrics.get(entry.measure) if meta is not None else None
            missing = (
                f"missing: evaluate stage {cond.evaluate.id} has not run"
                if meta is None
                else f"{entry.measure} was not evaluated"
            )
            observed.append(
                Observed(collapsed, outcome.reason if outcome is not None else "", train is not None, value, missing)
            )
        found.append(observed)
    return judge(entry, what_line(entry), found)


def _row_matches(entry: Any, c: Any, twins: bool = False) -> bool:
    """``_matches`` for a results folder's condition, whose variant label joins the names of one model
    ("baseline = x1")."""
    from types import SimpleNamespace

    variant, engine = _engine_of(c)
    return _matches(
        entry,
        SimpleNamespace(
            system=c.system,
            backbone=c.backbone,
            trained=c.trained,
            variant=variant,
            variants=tuple(v.strip() for v in variant.split(" = ")),
            engine=engine,
        ),
        twins,
    )


def expected_entries(results: Any) -> tuple[list[Any], str]:
    """The entries the page checks, and where they come from: those the results recorded, else (results
    written before they were) the packaged suite's of the same name."""
    from benchmark.common.config import from_dict
    from benchmark.suites import Expected, load_suite, suite_names

    if results.expected is not None:
        return [
            from_dict(Expected, e, "results.json expected") for e in results.expected
        ], "the suite's, recorded with these results"
    if results.suite in suite_names():
        return list(
            load_suite(results.suite).expected
        ), f"the packaged suite file's ({results.suite}.toml; these results predate recording them)"
    return [], ""


def applies_to_results(entry: Any, results: Any) -> bool:
    """``applies`` for a results folder: its subset, one of its datasets, and a published model it evaluated."""
    columns = set(results.column_names()) | {c.dataset for c in results.conditions}
    evaluated = [c.backbone for c in results.conditions if c.system == entry.system]
    if not system(entry.system).evaluates(entry, evaluated):
        return False
    if results.subset and not any(_row_matches(entry, c, twins=True) for c in results.conditions):
        return False  # a row the command line left out of this folder
    return entry.dataset in columns and entry.max_docs == results.max_docs and entry.max_queries == results.max_queries


@dataclass(frozen=True)
class PageCheck:
    """A verdict for the page: the entry, its verdict and the commands that reproduce what it checked."""

    entry: Any
    verdict: Verdict
    commands: tuple[str, ...]


def check_results(results: Any) -> tuple[list[PageCheck], int, str]:
    """Every applicable entry's verdict from a results folder alone (what ``--check`` prints for the same
    run), the number of entries for other subsets or datasets, and where the entries come from."""
    entries, source = expected_entries(results)
    relevant = [e for e in entries if applies_to_results(e, results)]
    out = []
    for entry in relevant:
        members = results.groups.get(entry.dataset, [entry.dataset])
        found: list[list[Observed] | str] = []
        commands: list[str] = []
        for conds in _matching(entry, results.conditions, members, _row_matches):
            if isinstance(conds, str):
                found.append(conds)
                break
            commands += [c.command for c in conds if c.command]
            found.append(
                [
                    Observed(
                        c.outcome == COLLAPSED,
                        c.outcome_reason,
                        c.trained and c.outcome != MISSING,
                        c.metrics.get(entry.measure) if c.scored else None,
                        f"missing: evaluate stage {c.evaluate_id} has not run"
                        if not c.metrics
                        else f"{entry.measure} was not evaluated",
                    )
                    for c in conds
                ]
            )
        out.append(PageCheck(entry, judge(entry, what_line(entry), found), tuple(dict.fromkeys(commands))))
    return out, len(entries) - len(relevant), source


def version_warnings(plan: Any, store: Store) -> list[str]:
    """One line per set of differing versions among the plan's finished stages."""
    from benchmark.common.environment import differences

    by_diff: dict[str, list[str]] = {}
    for stage in plan.stages():
        meta = store.load(stage)
        if meta is not None:
            diff = differences(meta.get("environment"))
            if diff:
                by_diff.setdefault(", ".join(diff), []).append(stage.id)
    return [
        f"[warn] {len(ids)} cached stage(s) were computed with other versions: {diff} (e.g. {ids[0]}); "
        "rerun with --force to recompute them here"
        for diff, ids in by_diff.items()
    ]


def check_suite(plan: Any, store: Store, out: Callable[[str], None] = print) -> int:
    """Print a verdict per applicable ``[[expected]]`` entry; 1 if any FAILs, else 0."""
    for line in version_warnings(plan, store):
        out(line)
    entries = list(plan.suite.expected)
    relevant = [e for e in entries if applies(e, plan)]
    models = sum(not_evaluated(e, plan) for e in entries)
    subset = (
        f"max_docs={plan.max_docs}, max_queries={plan.max_queries}"
        if plan.max_docs or plan.max_queries
        else "full datasets"
    )
    if not relevant:
        out(
            f"check: suite {plan.suite.name} has no expected scores for this run ({subset}); "
            f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} for other subsets or datasets"
            + (f" (or rows this run does not evaluate: {models})" if models else "")
        )
        return 0
    counts = {VERDICT_OK: 0, VERDICT_OKISH: 0, VERDICT_FAIL: 0}
    for entry in relevant:
        v = check_entry(entry, plan, store)
        counts[v.verdict] += 1
        out(f"{'[' + v.verdict + ']':8} {v.what} {v.detail}")
    skipped = len(entries) - len(relevant)
    out(
        f"check ({subset}): {counts[VERDICT_OK]} OK, {counts[VERDICT_OKISH]} OKish, {counts[VERDICT_FAIL]} FAIL"
        + (f"; {skipped} entries for other subsets or datasets not checked" if skipped else "")
        + (f" (of them {models} for rows this run does not evaluate)" if models else "")
    )
    return 1 if counts[VERDICT_FAIL] else 0


#: the table key's entry for a score with its expected value beside it
REFERENCE_LEGEND = "ref: the suite's expected score and its --check verdict"


def attach_references(results: Any, tables: list[Any]) -> None:
    """Put each applicable expected score, with its verdict, beside the score it checks (``Table.references``),
    as 2CR's pages show the reference next to the number; a table that gets one gets the key's entry."""
    checks, _, _ = check_results(results)
    for check in checks:
        entry = check.entry
        if entry.collapsed or not entry.measure:
            continue
        rows = list(dict.fromkeys(c.row for c in _named(entry, results.conditions, _row_matches)))
        for table in tables:
            if table.measure != entry.measure or entry.dataset not in {col.name for col in table.columns}:
                continue
            for row in rows:
                if row in table.info:
                    table.references[(row, entry.dataset)] = (f"{entry.value:.4f}", check.verdict.verdict)
            if table.references and REFERENCE_LEGEND not in table.legend:
                table.legend.append(REFERENCE_LEGEND)
