"""A run file made elsewhere (``--run NAME=PATH``), evaluated on the run's one dataset: a row by its name."""

from __future__ import annotations

from typing import Any

from benchmark.pipeline.systems.base import RUN, Build, Condition, RowKey, System, tag_text
from benchmark.stages import RunFile
from benchmark.stages.store import Stage


class RunFileSystem(System):
    order = 20
    name = RUN
    searches = False
    expected_entries = False  # a run file is the user's own, made elsewhere: no score a suite could expect

    how_to_add = "add --run NAME=PATH"

    def present(self, suite: Any, opts: Any) -> bool:
        return bool(opts.runs)

    def conditions(self, build: Build) -> list[Condition]:
        runs, datasets = build.opts.runs, build.datasets
        if runs and len(datasets) != 1:
            build.problems.append(
                f"--run evaluates a run file on one dataset, and this run has {len(datasets)} "
                f"({', '.join(datasets) or 'none'}); pass --datasets with the one the run file was made on"
            )
            return []
        out = []
        for run_name, path in runs:
            topics, corpus = build.data(datasets[0])
            source = Stage(RunFile, RunFile.Config(path), {"topics": topics, "corpus": corpus})
            evaluate = build.evaluate(source, datasets[0])
            out.append(
                Condition(
                    datasets[0],
                    RUN,
                    variant=run_name,
                    evaluate=evaluate,
                    search=source,
                    command=build.command(systems=RUN, run=run_name),
                )
            )
        return out

    def label(self, key: RowKey) -> str:
        return f"{key.variant} (run file)"

    def tag(self, c: Any) -> str:
        return tag_text(f"{c.system}.{c.variant}")

    def dry_run(self, c: Condition) -> str:
        return f"run {c.variant}"


SYSTEM = RunFileSystem()
