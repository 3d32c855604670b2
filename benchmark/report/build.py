"""One suite folder: write its results, render every table, plot and the page from them, and rebuild
all suite folders under ``results/`` from their files alone (one broken folder is one line)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmark.common.atomic import replace_folder, write_csv, write_text
from benchmark.common.errors import BenchmarkError
from benchmark.report import html, latex, markdown, tidy
from benchmark.report.check import attach_references
from benchmark.report.collect import collect, refresh
from benchmark.report.judgements import JUDGEMENT_COLUMNS, judgement_rows
from benchmark.report.mteb import write_mteb
from benchmark.report.plots import AVERAGES, NORMS, PLOTS, SWEEP, averages_plot, norms_plot, sweep_plot, telemetry_plots
from benchmark.report.results import PERQUERY, RESULTS, STAGE_LOG, SuiteResults, read_results, write_results
from benchmark.report.table import suite_tables
from benchmark.training.outcomes import MISSING

TABLES = ("table.md", "table.csv", "table.tex", latex.NOTES_FILE)
PAGE = "index.html"
METRICS = "metrics.csv"
JUDGEMENTS = "judgements.csv"


def render(results: SuiteResults, folder: Path, name: str | None = None) -> list[str]:
    """Every derived file of ``folder`` from ``results``: metrics.csv, the tables, the plots, index.html
    (``name``: the folder's name once published, when ``folder`` is its staging copy)."""
    folder = Path(folder)
    published = name or folder.name
    tables = suite_tables(results)
    attach_references(results, tables)
    labels = results.settings().labels
    write_csv(folder / METRICS, tidy.metric_rows(results), tidy.METRIC_COLUMNS)
    judged = {r: tables[0].info[r].judgements for r in tables[0].rows}
    write_csv(folder / JUDGEMENTS, judgement_rows(judged), JUDGEMENT_COLUMNS)
    title = results.suite + (f" @ {results.subset}" if results.subset else "")
    write_text(folder / "table.md", markdown.document(title, tables, labels))
    write_csv(folder / "table.csv", [r for t in tables for r in tidy.table_rows(t)], tidy.TABLE_COLUMNS)
    write_text(folder / "table.tex", latex.document(tables, labels))
    write_text(folder / latex.NOTES_FILE, latex.notes_document(tables))
    made = {
        SWEEP: sweep_plot(tables[0], results, folder / SWEEP),
        AVERAGES: averages_plot(tables[0], folder / AVERAGES),
        NORMS: norms_plot(results, folder / NORMS),
    }
    for name in PLOTS:  # a plot that no longer applies must not linger beside the page
        if not made[name] and (folder / name).exists():
            (folder / name).unlink()
    plots = [name for name in PLOTS if made[name]]
    telemetry_plots(results, folder)
    exports = write_mteb(results, folder)
    files = [METRICS, JUDGEMENTS, *TABLES, RESULTS] + ([PERQUERY] if (folder / PERQUERY).exists() else [])
    runs = [c.run_file for c in results.conditions if c.run_file and (folder / c.run_file).is_file()]
    write_text(
        folder / PAGE, html.page(results, tables, plots, files, published, exports=[*runs, *exports], legends=made)
    )
    return [METRICS, JUDGEMENTS, *TABLES, *plots, PAGE] + ([f"{len(exports)} MTEB JSON"] if exports else [])


def publish(results: SuiteResults, folder: Path, extra: Callable[[Path], None] | None = None) -> Path:
    """Write the results, then render from what was written (a rebuild gives the same files), all in a
    staging folder that replaces ``folder`` whole: a kill while writing leaves the earlier folder as it
    was, never new tables beside old ones.

    Args:
        results: the suite's conditions, metrics and per-query values.
        folder: the results folder to replace (``results/<suite>/``).
        extra: called with the staging folder to add files before rendering (the run's stage log).

    Returns:
        ``folder``, complete.
    """
    folder = Path(folder)

    def fill(staging: Path) -> None:
        write_results(results, staging)
        if extra is not None:  # the stage log first: the page's efficiency columns read it
            extra(staging)
        render(read_results(staging), staging, name=folder.name)

    replace_folder(folder, fill)
    return folder


def is_complete(folder: Path) -> bool:
    """A readable results folder in which every condition ran (scored, or stopped at its collapse)."""
    try:
        results = read_results(Path(folder))
    except BenchmarkError:
        return False
    return all(c.state != MISSING for c in results.conditions)


def write_suite_results(
    plan: Any, store: Any, results_dir: Path, folder: str | None = None, extra: Callable[[Path], None] | None = None
) -> Path:
    """``results/<folder>/`` (default: the suite's name) from a finished or partly finished plan."""
    return publish(collect(plan, store), Path(results_dir) / (folder or plan.suite.name), extra)


def write_stage_log(plan: Any, store: Any, out_dir: Path) -> None:
    """Every finished stage of the plan: the wall time it took when computed, its bytes on disk, and
    whether this run computed it or found it cached (``results/<suite>/stages.csv``)."""
    from benchmark.common.disk import disk_usage

    def rows() -> Iterable[dict[str, Any]]:
        for stage in plan.stages():
            meta = store.load(stage)
            if meta is not None:
                state = "computed" if store.timings.get(stage.id) else "cached"
                yield {
                    "stage": stage.kind.name,
                    "id": stage.id,
                    "seconds": f"{meta['seconds']:.2f}",
                    "bytes": disk_usage(store.path(stage)),
                    "this_run": state,
                }

    write_csv(out_dir / STAGE_LOG, rows(), ["stage", "id", "seconds", "bytes", "this_run"])


def publish_run(plan: Any, store: Any, results_dir: Path, folder: str, failed: bool) -> tuple[Path, bool]:
    """A run's tables, with its stage log, as ``results_dir/folder``: (where they went, whether a complete
    folder was kept). A failed run never replaces a complete folder: its tables, of the finished
    conditions, go beside it into ``.<folder>.incomplete``, hidden from rebuilds; a complete run removes
    that aside."""
    results_dir = Path(results_dir)
    aside = f".{folder}.incomplete"
    kept = failed and is_complete(results_dir / folder)
    out = write_suite_results(
        plan,
        store,
        results_dir,
        folder=aside if kept else folder,
        extra=lambda staging: write_stage_log(plan, store, staging),
    )
    if not failed:
        shutil.rmtree(results_dir / aside, ignore_errors=True)  # superseded by the complete folder
    return out, kept


def headline(out: Path) -> str:
    """The first table of ``table.md`` (the headline measure) with its key, for the terminal at the end of a
    run; its notes stay in the file (they run to pages)."""
    try:
        text = (out / "table.md").read_text(encoding="utf-8")
    except OSError:
        return ""
    sections = text.split("\n## ")
    first = ("## " + sections[1]) if len(sections) > 1 else text
    table, folded, _ = first.partition("\n<details>")
    return table.strip() + (f"\n\nNotes: {out / 'table.md'}" if folded else "")


def _keep(folder: Path, staging: Path, name: str) -> None:
    if (folder / name).is_file():
        shutil.copy2(folder / name, staging / name)


def _rerender(folder: Path, warn: Callable[[str], None]) -> list[str]:
    """Render a folder again from its own results, in a staging copy that replaces it whole."""
    written: list[str] = []

    def fill(staging: Path) -> None:
        shutil.copytree(folder, staging, dirs_exist_ok=True, symlinks=True)  # a link is copied as a link, not followed
        try:
            results = read_results(staging, warn=lambda line: warn(line.replace(str(staging), str(folder))))
            written.extend(render(results, staging, name=folder.name))
        except BenchmarkError as exc:  # named by the folder, not by its staging copy
            raise BenchmarkError(str(exc).replace(str(staging), str(folder))) from None

    replace_folder(folder, fill)
    return written


def rebuild(
    results_dir: Path,
    suites: Iterable[str] | None = None,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] | None = None,
) -> int:
    """Rebuild every suite folder (or ``suites``) from its files, each on its own: one failing folder is
    one line, and the others are still rebuilt.

    Args:
        results_dir: the folder of results folders.
        suites: folder names to rebuild (default: every folder holding results).
        out: where a rebuilt folder's line goes.
        err: where a failed folder's line goes (default: stderr).

    Returns:
        0 when every folder was rebuilt, else 1.
    """
    err = err or (lambda line: print(line, file=sys.stderr))
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise BenchmarkError(f"results folder {str(results_dir)!r} does not exist; pass --results-dir DIR")
    folders = sorted(p for p in results_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    failed = 0
    if suites:
        wanted = list(dict.fromkeys(suites))
        names = {p.name for p in folders}
        for name in wanted:
            if name not in names:
                err(f"failed {name}: no folder {results_dir / name}; found: {', '.join(sorted(names)) or 'none'}")
                failed += 1
        folders = [p for p in folders if p.name in wanted]
    for folder in folders:
        if (folder / RESULTS).is_file():
            try:
                written = _rerender(folder, err)
            except BenchmarkError as exc:
                err(f"failed {folder}: {exc}")
                failed += 1
            except Exception as exc:  # never fail as a whole: one line for this folder, the others go on
                err(f"failed {folder}: {type(exc).__name__}: {exc}")
                failed += 1
            else:
                out(f"rebuilt {folder}: {', '.join(written)}")
        else:
            out(f"skipped {folder}: no {RESULTS} (not a suite's results)")
    return 1 if failed else 0


def refresh_suites(
    results_dir: Path,
    suites: Iterable[str],
    runs_dir: Path,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] | None = None,
) -> int:
    """Re-read ``suites`` from ``runs_dir`` by the stage ids their results record, then rebuild them."""
    err = err or (lambda line: print(line, file=sys.stderr))
    failed = 0
    runs_dir = Path(runs_dir)
    for name in dict.fromkeys(suites):
        folder = Path(results_dir) / name
        try:
            if not runs_dir.is_dir():
                raise BenchmarkError(f"runs folder {str(runs_dir)!r} does not exist; pass --runs-dir DIR")
            if not (folder / RESULTS).is_file():
                raise BenchmarkError(
                    f"no {RESULTS} in {folder}; run the suite first (python -m benchmark.run --suite {name})"
                )
            publish(refresh(folder, runs_dir), folder, extra=lambda staging: _keep(folder, staging, STAGE_LOG))  # noqa: B023  (called within this iteration)
        except BenchmarkError as exc:
            err(f"failed {folder}: {exc}")
            failed += 1
        else:
            out(f"refreshed {folder} from {runs_dir}")
    return 1 if failed else 0
