"""The Python API: ``benchmark.evaluate`` scores a system on a dataset from a notebook, through the same plan,
stages and ``runs/`` cache as ``benchmark run``; ``benchmark.load_results`` reads a results folder. Both
return pandas frames. Nothing heavy is imported until a call (``import benchmark`` stays cheap)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError

if TYPE_CHECKING:
    import pandas as pd

    from benchmark.report.frames import ResultFrames

#: The columns that name a row of ``evaluate``'s frames (then one column per measure, or the per-query ones).
ROW_COLUMNS = ["row", "system", "dataset", "seed"]
PERQUERY_COLUMNS = [*ROW_COLUMNS, "query_id", "measure", "value"]


def _run_name(path: Path) -> str:
    """A run file's row name: its file name without suffixes, as ``--run`` accepts it."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "-", path.name.split(".")[0]) or "run"
    return name[:64] if name.lower() not in ("bm25", "splade") else f"{name}-run"


def system_argv(system: str | os.PathLike[str]) -> list[str]:
    """The ``benchmark run`` flags that select ``system``: ``"bm25"``, ``"splade"`` (the suite's own SPLADE
    rows, trained and untrained), a TREC run file, or a SparseEncoder folder or hub id."""
    text = os.fspath(system)
    if text in ("bm25", "splade"):
        return ["--systems", text]
    path = Path(text).expanduser()
    if path.is_file():
        return ["--systems", "run", "--run", f"{_run_name(path)}={path}"]
    return ["--systems", "published", "--published", text]


def evaluate(
    system: str | os.PathLike[str],
    dataset: str,
    measures: Sequence[str] | None = None,
    *,
    suite: str | None = None,
    per_query: bool = False,
    runs_dir: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    progress: bool = False,
    flags: Sequence[str] = (),
) -> pd.DataFrame:
    """Score ``system`` on ``dataset``: the stages ``benchmark run`` would plan, computed or reused from the
    same ``runs/`` folder, so a notebook and the command line share every cached stage.

    Args:
        system: ``"bm25"``; a TREC run file; a SparseEncoder folder (``benchmark export``) or hub id
            (``naver/splade-v3``); or ``"splade"``, the trained (and untrained) SPLADE rows of ``suite``.
        dataset: an ir_datasets id (``beir/scifact/test``) or a local BEIR folder ``PATH[@split]``.
        measures: ir_measures strings (``["nDCG@10", "R@100"]``); default: the suite's, or without
            ``suite`` those of the dataset's conventions, as ``benchmark run --datasets`` evaluates.
        suite: a packaged suite or a suite .toml whose settings (BM25 k1/b, encode lengths, recipe) apply,
            as ``benchmark run --suite``; default: an ad-hoc suite of ``dataset``.
        per_query: one line per query and measure (columns ``row, system, dataset, seed, query_id,
            measure, value``, as ir_measures' ``iter_calc``), instead of one line per row with a column
            per measure, each the mean over every judged query (0 where a query got no hit, as trec_eval -c).
        runs_dir: where stages are stored and reused (default: ``$BENCHMARK_RUNS_DIR``, else ``runs``).
        threads: Lucene threads (default: every core).
        progress: show progress bars.
        flags: further ``benchmark run`` flags (``["--max-docs", "600"]``, ``["--set", "bm25.k1=1.2"]``).

    Returns:
        A pandas DataFrame; ``row`` names each system as the tables do ("BM25", "SPLADE bert-tiny baseline").
    """
    import pandas as pd

    from benchmark.pipeline.executor import LocalExecutor
    from benchmark.run import build_parser, prepare
    from benchmark.stages import Context, Evaluate
    from benchmark.stages.store import Stage

    wanted = _measures(measures)  # a bad measure is one line before any work
    argv = (["--suite", suite] if suite is not None else []) + ["--datasets", dataset] + system_argv(system)
    runs = os.fspath(runs_dir) if runs_dir is not None else os.environ.get("BENCHMARK_RUNS_DIR", "runs")
    argv += ["--runs-dir", runs, *flags]
    if threads is not None:
        argv += ["--threads", str(threads)]
    args = build_parser().parse_args(argv)
    plan, store, _, _ = prepare(args)
    store.check_writable()
    store.sweep()
    targets = []
    for cond in plan.conditions:
        assert cond.evaluate is not None
        if wanted is not None:  # the stage a suite of these measures would plan: same parents, same cache
            cond_eval = Stage(Evaluate, Evaluate.Config(tuple(sorted(wanted))), dict(cond.evaluate.parents))
        else:
            cond_eval = cond.evaluate
        targets.append((cond, cond_eval))
    ctx = Context(threads=args.threads, progress=progress, log=lambda line: None if not progress else print(line))
    LocalExecutor(store, ctx).run([e for _, e in targets])  # raises at a failed stage
    return _frame(targets, store, wanted or None, per_query, pd, plan.dataset_measures)


def _measures(measures: Sequence[str] | None) -> list[str] | None:
    """Canonical ir_measures strings; an invalid one is one line naming it before any work."""
    if measures is None:
        return None
    if isinstance(measures, str):
        measures = [measures]
    from benchmark.evaluation.measures import measure_problems, normalise_measure

    problems = measure_problems(list(measures))
    if problems:
        raise BenchmarkError(problems[0])
    return list(dict.fromkeys(normalise_measure(m) for m in measures))


def _frame(
    targets: list[tuple[Any, Any]],
    store: Any,
    wanted: list[str] | None,
    per_query: bool,
    pd: Any,
    suite_measures: Any,
) -> Any:
    """The frame of the evaluated conditions; measures in the order asked, else the suite's (headline first)."""
    from benchmark.formats.perquery import perquery_path, read_perquery
    from benchmark.report.labels import system_label
    from benchmark.stages.records import EvaluateRecord, parse

    lines: list[dict[str, Any]] = []
    order: list[str] = []
    for cond, stage in targets:
        meta = store.load(stage)
        if meta is None:  # a training run that stopped early: no scores, as the tables mark it
            continue
        record = parse(meta, EvaluateRecord)
        head = {
            "row": system_label(cond.system, cond.backbone, cond.variant, cond.trained),
            "system": cond.system,
            "dataset": cond.dataset,
            "seed": cond.seed,
        }
        names = wanted or list(dict.fromkeys([*suite_measures.get(cond.dataset, []), *record.metrics]))
        names = [m for m in names if m in record.metrics]
        order += [m for m in names if m not in order]
        if per_query:
            values = read_perquery(perquery_path(store.path(stage)))
            for measure in names:
                lines += [
                    {**head, "query_id": qid, "measure": measure, "value": v}
                    for qid, v in sorted(values.get(measure, {}).items())
                ]
        else:
            lines.append({**head, "queries": record.queries, **{m: record.metrics[m] for m in names}})
    columns = PERQUERY_COLUMNS if per_query else [*ROW_COLUMNS, "queries", *order]
    frame = pd.DataFrame(lines, columns=columns)
    frame["seed"] = frame["seed"].astype("Int64")  # absent for BM25, run files and untrained rows
    return frame


def load_results(path: str | os.PathLike[str]) -> ResultFrames:
    """A results folder (``results/<suite>``, what ``benchmark run`` writes) as pandas frames.

    Args:
        path: the folder that holds ``results.json`` and ``perquery.csv.gz``.

    Returns:
        ``ResultFrames``: ``.scores`` (one line per row, dataset, measure and seed), ``.perquery`` (one line
        per row, dataset, seed, measure and query) and ``.versus(a, b, measure)`` (per-query wins and losses).
    """
    from benchmark.report.frames import load_results as load

    return load(os.fspath(path))
