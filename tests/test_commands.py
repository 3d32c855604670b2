"""The commands: ``benchmark COMMAND`` (and ``python -m benchmark``) dispatches to each module's command,
and scripts/install_commands.py (run by scripts/setup.sh) writes every console command of pyproject.toml
as an executable that runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_benchmark_dispatches_to_each_command(capsys):
    from benchmark.__main__ import COMMANDS, main

    assert list(COMMANDS) == ["run", "report", "export", "norms", "perf"]
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--version"])
        assert exit_.value.code == 0 and capsys.readouterr().out == f"splade-rescale-benchmark {VERSION}\n", name
    assert main(["--version"]) == 0 and capsys.readouterr().out == f"splade-rescale-benchmark {VERSION}\n"
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {name} " in out for name in COMMANDS)
    assert main([]) == 2  # no command: the list, and a failing status
    assert main(["train"]) == 2
    assert capsys.readouterr().err == (
        "error: unknown command 'train'; valid: run, report, export, norms, perf. "
        "Run benchmark --help for what each does\n"
    )
    assert main(["run", "--dry-run"]) == 2  # the run command's own one-line error (no --suite, no --datasets)
    assert capsys.readouterr().err.startswith("error: give --suite NAME")


def test_export_has_version_and_defaults(capsys):
    from benchmark.report.model_export import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"splade-rescale-benchmark {VERSION}\n"
    help_text = build_parser().format_help()
    assert "(default: exports)" in help_text and "(default: none)" in help_text


def test_install_commands_writes_every_console_command(tmp_path):
    """The files scripts/setup.sh writes into .venv/bin: each runs (a fresh process) and answers
    --version; written twice, they are left as they are."""
    script = ROOT / "scripts" / "install_commands.py"
    bin_dir = tmp_path / "bin"
    subprocess.run([sys.executable, str(script), str(bin_dir)], check=True, timeout=60)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted(scripts)
    stamps = {p.name: p.stat().st_mtime_ns for p in bin_dir.iterdir()}
    subprocess.run([sys.executable, str(script), str(bin_dir)], check=True, timeout=60)
    assert {p.name: p.stat().st_mtime_ns for p in bin_dir.iterdir()} == stamps  # idempotent
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in scripts:
        proc = subprocess.run([str(bin_dir / name), "--version"], capture_output=True, text=True, timeout=120, env=env)
        assert (proc.returncode, proc.stdout) == (0, f"splade-rescale-benchmark {VERSION}\n"), (name, proc.stderr)
    proc = subprocess.run(
        [str(bin_dir / "benchmark"), "run", "--suite", "smoke", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("suite smoke: "), proc.stderr


def test_setup_installs_the_commands():
    """scripts/setup.sh writes the commands after the .pth file, and its early exit (nothing changed) needs them."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert ".venv/bin/python scripts/install_commands.py .venv/bin" in text
    assert "[ -x .venv/bin/benchmark ]" in text and "scripts/install_commands.py | sha256sum" in text
