"""Row commands, as on Pyserini's 2CR pages: each table row carries the one command that produces that row
and nothing else (``benchmark run --suite smoke --systems bm25 --datasets beir/scifact/test``), runnable as
written in a shell where ``benchmark`` is on the path, with a placeholder where a path of the machine that
ran it would stand. ``--systems`` narrows a suite to row families without changing any stage's id."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.pipeline.systems import SYSTEMS as REGISTERED
from benchmark.suites import Suite

#: The row families ``--systems`` selects: every registered system (BM25, run files, models trained
#: elsewhere, the suite's SPLADE models), so a new family's module makes it selectable.
SYSTEMS = tuple(REGISTERED)

#: The command a row's reproduction starts with (``scripts/setup.sh`` installs it into ``.venv/bin``).
PROGRAM = ("benchmark", "run")

#: Flags in the order a row command gives them.
FLAGS = (
    "systems",
    "datasets",
    "backbones",
    "variants",
    "seeds",
    "published",
    "engines",
    "recipe",
    "rescale-factor",
    "match-norm",
    "rescale-method",
    "match-stat",
    "max-docs",
    "max-queries",
)


def suite_systems(suite: Suite, opts: Any) -> list[str]:
    """The row families a suite (with the command line's ``--published`` and ``--run``) can produce."""
    return [name for name, system in REGISTERED.items() if system.present(suite, opts)]


def systems_problem(suite: Suite, opts: Any) -> str | None:
    """One line for a bad ``--systems`` value (with a close match), or a family this run has no rows of."""
    if opts.systems is None:
        return None
    bad = [s for s in opts.systems if s not in SYSTEMS]
    if bad:
        hint = difflib.get_close_matches(bad[0], SYSTEMS, n=1)
        return (
            f"--systems {bad[0]!r} is not a row family"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f"; valid: {', '.join(SYSTEMS)}, comma-separated, e.g. --systems bm25"
        )
    have = suite_systems(suite, opts)
    missing = [s for s in opts.systems if s not in have]
    if missing:
        fixes = "; ".join(REGISTERED[s].how_to_add for s in missing if REGISTERED[s].how_to_add)
        return (
            f"--systems {','.join(missing)}: suite {suite.name!r} has no such rows here (its systems: "
            f"{', '.join(have) or 'none'})" + (f"; {fixes}" if fixes else "; drop them from --systems")
        )
    if opts.runs and "run" not in opts.systems:
        return f"--run is given but --systems {','.join(opts.systems)} leaves out its rows; add run to --systems"
    return None


def _is_local(value: str) -> bool:
    """A path of the machine that ran the command (a command on a page names no such path)."""
    return value.startswith(("/", "~", ".")) or "\\" in value or Path(value).expanduser().exists()


def placeholder(value: str) -> str:
    """``<path to NAME>`` for a local path (the reader puts theirs; a BEIR folder keeps its ``@split``), else the
    value as given."""
    if not _is_local(value):
        return value
    path, at, split = value.rpartition("@")
    if not at or "/" in split or not path:
        path, split = value, ""
    return f"<path to {Path(path.rstrip('/')).name or path}>" + (f"@{split}" if split else "")


def row_command(suite_arg: str, opts: Any, row: Mapping[str, Any]) -> str:
    """The command that produces one row: the run's own narrowing, then the row's family, dataset and model
    (``row``: flag → value; ``trained``/``untrained`` keep one side of a suite that has both; ``run``: the
    name of a ``--run`` file)."""
    from benchmark.suites.adhoc import ADHOC

    args = list(PROGRAM)
    if suite_arg != ADHOC:
        args += ["--suite", placeholder(suite_arg) if suite_arg.endswith(".toml") else suite_arg]
    flags = dict(opts.narrowing())
    flags.update({k: str(v) for k, v in row.items() if v is not None and k in FLAGS})
    for flag in FLAGS:
        if flag in flags:
            value = flags[flag]
            if flag in ("published", "backbones"):  # a local folder as its content names it, not as it was typed
                from benchmark.model.identity import command_path

                value = ",".join(command_path(v) for v in value.split(","))
            elif flag in ("datasets", "recipe"):
                value = ",".join(placeholder(v) for v in value.split(","))
            args += [f"--{flag}", value]
    for item in opts.sets:
        args += ["--set", item]
    if row.get("untrained"):
        args += ["--set", 'splade.recipe=""']
    elif row.get("trained"):
        args += ["--set", "splade.untrained=false"]
    for name, path in opts.runs:
        if row.get("run") in (None, name):
            args += ["--run", f"{name}=<path to {Path(path).name}>"]
    # a placeholder stays as the reader replaces it, unquoted
    return " ".join(a if re.search(r"<(path to|folder) [^>]*>", a) else shlex.quote(a) for a in args)
