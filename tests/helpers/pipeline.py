"""The pipeline command as tests call it, and the CI slice of SciFact they run it on."""

from __future__ import annotations

# A small, deterministic slice of SciFact test: judged documents always stay in.
SUBSET = ["--max-docs", "600", "--max-queries", "30"]


def run_cli(*args: str) -> int:
    from benchmark.run import main

    return main([*args, "--no-progress"])
