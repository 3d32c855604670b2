"""The commands: ``benchmark COMMAND`` (and ``python -m benchmark``) dispatches to each module's command,
and scripts/install_commands.py (run by scripts/setup.sh) writes every console command of pyproject.toml
as an executable that runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from helpers import ROOT

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
        "benchmark: error: unknown command 'train'; valid: run, report, export, norms, perf. "
        "Run benchmark --help for what each does\n"
    )
    assert main(["run", "--dry-run"]) == 2  # the run command's own one-line error (no --suite, no --datasets)
    assert capsys.readouterr().err.startswith("error: give --suite NAME")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "--chek"], "benchmark run: error: unknown flag --chek (did you mean --check?)"),
        (["run", "--dry-rn"], "benchmark run: error: unknown flag --dry-rn (did you mean --dry-run?)"),
        (
            ["run", "--keep", "al"],
            "benchmark run: error: argument --keep: invalid choice 'al' (did you mean 'all'?); valid: all, indexed, "
            "auto",
        ),
        (["report", "--result-dir", "x"], "benchmark report: error: unknown flag --result-dir (did you mean "),
        (
            ["export", "--suite", "s", "--outt", "x"],
            "benchmark export: error: unknown flag --outt (did you mean --out?)",
        ),
        (["norms", "--backbone", "x", "--samplez"], "benchmark norms: error: unknown flag --samplez"),
        (["perf", "--threadz", "2"], "benchmark perf: error: unknown flag --threadz (did you mean --threads?)"),
        (["perf", "scale", "--bogus"], "benchmark perf scale: error: unknown flag --bogus."),
    ],
)
def test_argparse_errors_are_one_line_under_the_command_name(capsys, argv, line):
    """argparse prints its whole usage, then an error under the module's name, and suggests nothing; here each
    command's parse error is one line under the name typed, with the flag or choice a typo most likely meant."""
    from benchmark.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and err.startswith(line), err
    assert err.endswith(
        f"Run benchmark {' '.join(argv[:2] if argv[1] == 'scale' else argv[:1])} --help for every flag\n"
    )


def test_module_parsers_keep_their_module_name(capsys):
    """Outside ``benchmark COMMAND`` (python -m benchmark.run), the parser names the module, as typed."""
    from benchmark.run import main

    with pytest.raises(SystemExit):
        main(["--chek"])
    assert capsys.readouterr().err.startswith(
        "python -m benchmark.run: error: unknown flag --chek (did you mean --check?)"
    )


def test_unknown_command_suite_variant_and_export_target_get_a_suggestion(capsys, tmp_path):
    from benchmark.__main__ import main

    assert main(["rnu"]) == 2
    assert capsys.readouterr().err.startswith("benchmark: error: unknown command 'rnu' (did you mean 'run'?); valid: ")
    assert main(["run", "--suite", "smok", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown suite 'smok' (did you mean 'smoke'?)")
    assert main(["run", "--suite", "smoke", "--variants", "rescaledd", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown variant(s) 'rescaledd' (did you mean 'rescaled'?); ")
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "results.json").write_text("{}")
    assert main(["export", "--suite", "smok", "--results-dir", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no results folder {tmp_path / 'smok'} (did you mean 'smoke'?)") and err.endswith(
        "(smoke)\n"
    )


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
