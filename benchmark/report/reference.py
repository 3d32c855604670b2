"""Committed reference results stay as committed: a run whose results folder is tracked by git (the
repository's ``results/smoke``, ``results/paper-mini``, …) writes its tables beside it, into
``<folder>@local``, which ``.gitignore`` ignores with every other folder a run makes under ``results/``;
a fresh clone's run so leaves ``git status`` clean, and the reference is there to compare with."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: the suffix of a run's own folder beside a committed reference
LOCAL = "@local"


def is_committed(folder: Path) -> bool:
    """Whether git tracks a file in ``folder`` (False outside a repository or without git)."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "--", "."], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def run_folder(results_dir: Path, folder: str) -> str:
    """The folder a run publishes to: ``folder``, or ``folder@local`` when ``folder`` is a committed reference."""
    return folder + LOCAL if is_committed(Path(results_dir) / folder) else folder
