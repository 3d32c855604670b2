"""The linter, the formatter and the type checker run with the tests, so CI enforces them: ``ruff check``
and ``ruff format --check`` (pyproject's [tool.ruff]: lint, import order, 120 columns), and ``mypy``
(pyproject's [tool.mypy]: the whole package, perf/ included)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT


def _tool(module: str) -> list[str]:
    """The tool run by this interpreter, so the version the test extra pins is the one that runs."""
    try:
        __import__(module)
    except ImportError:
        pytest.fail(f"{module} is not installed; install the test extra: pip install -e '.[test]' -c constraints.txt")
    return [sys.executable, "-m", module]


def test_ruff_finds_nothing() -> None:
    done = subprocess.run(
        [*_tool("ruff"), "check", "--no-cache", "benchmark", "tests"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_changes_nothing() -> None:
    """The formatter's output is the committed code (pyproject's [tool.ruff]: 120 columns)."""
    done = subprocess.run(
        [*_tool("ruff"), "format", "--check", "--no-cache", "benchmark", "tests", "scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing_in_the_package(tmp_path: Path) -> None:
    cache = tmp_path / "mypy-cache"
    done = subprocess.run([*_tool("mypy"), "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, text=True)
    shutil.rmtree(cache, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checks_see_a_finding(tmp_path: Path) -> None:
    """Both tools, as configured, fail on a file with a finding (an unused import; a str passed as an int)."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    bad = tmp_path / "benchmark" / "stages" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("import os\n\n\ndef f(x: int) -> int:\n    return x\n\n\nf('1')\n", encoding="utf-8")
    lint = subprocess.run(
        [*_tool("ruff"), "check", "--no-cache", "benchmark"], cwd=tmp_path, capture_output=True, text=True
    )
    assert lint.returncode == 1 and "F401" in lint.stdout, lint.stdout + lint.stderr
    types = subprocess.run(
        [*_tool("mypy"), "--cache-dir", str(tmp_path / "cache"), str(bad)], cwd=tmp_path, capture_output=True, text=True
    )
    assert types.returncode == 1 and 'incompatible type "str"; expected "int"' in types.stdout, types.stdout
