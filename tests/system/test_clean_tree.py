"""A user's run leaves the checkout's ``git status`` clean: runs/, exports/ and every results folder a run
makes are ignored, and a committed reference folder is never rewritten (the run writes ``<folder>@local``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.report.reference import LOCAL, is_committed, run_folder
from helpers import ROOT


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "test@example.org")
    _git(path, "config", "user.name", "test")
    return path


def test_a_committed_results_folder_is_written_beside_itself(tmp_path: Path):
    repo = _repo(tmp_path / "repo")
    (repo / "results" / "smoke").mkdir(parents=True)
    (repo / "results" / "smoke" / "table.md").write_text("committed\n")
    (repo / "results" / "mine").mkdir()
    assert run_folder(repo / "results", "smoke") == "smoke"  # not yet tracked
    _git(repo, "add", "results/smoke/table.md")
    assert is_committed(repo / "results" / "smoke") and not is_committed(repo / "results" / "mine")
    assert run_folder(repo / "results", "smoke") == "smoke" + LOCAL
    assert run_folder(repo / "results", "mine") == "mine"
    assert run_folder(repo / "results", "absent") == "absent"
    assert run_folder(tmp_path / "elsewhere", "smoke") == "smoke"  # outside a repository: as named


def test_gitignore_ignores_what_a_run_makes_and_keeps_the_references():
    made = ["runs/topics/x", "exports/splade-bert-tiny", "results/smoke@local/table.md", "results/beir/table.md"]
    ignored = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", *made, "results/smoke/table.md"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert ignored == made


@pytest.mark.slow  # the smoke slice end to end (BM25, SPLADE untrained and trained 26 steps) in a copy
def test_a_smoke_slice_run_in_a_fresh_copy_leaves_git_status_clean(tmp_path: Path):
    copy = _repo(tmp_path / "clone")
    tracked = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")  # as committed
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "the checkout")
    assert _git(copy, "status", "--porcelain") == ""
    command = [sys.executable, "-m", "benchmark.run", "--suite", "smoke", "--max-docs", "600", "--max-queries", "30"]
    done = subprocess.run([*command, "--no-progress"], cwd=copy, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = copy / "results" / "smoke@max-docs=600,max-queries=30"
    assert (folder / "table.md").is_file() and (copy / "runs").is_dir()
    assert _git(copy, "status", "--porcelain") == ""
    # the folder committed as a reference: the same run again writes beside it and leaves it as committed
    _git(copy, "add", "-f", str(folder.relative_to(copy)))
    _git(copy, "commit", "-q", "-m", "a reference")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    done = subprocess.run([*command, "--no-progress"], cwd=copy, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "is the committed reference, left as it is" in done.stdout
    assert (folder.parent / (folder.name + LOCAL) / "table.md").is_file()
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert _git(copy, "status", "--porcelain") == ""
