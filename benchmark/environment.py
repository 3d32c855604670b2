"""What computed a stage: package versions, the Anserini jar and the project's commit.

Recorded in every stage's ``config.json``; ``--check`` warns when cached stages come from other
versions than the ones installed now.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import platform
import subprocess
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "sentence-transformers", "accelerate", "pyserini", "ir_measures",
            "ir_datasets", "numpy")
DISTRIBUTION = "splade-rescale-benchmark"


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _anserini_jar() -> str | None:
    """The Anserini fatjar that pyserini ships, found without importing pyserini (that starts a JVM)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.origin:
        return None
    jars = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*.jar"))
    return jars[-1].name if jars else None


def _commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "benchmark"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head or None, "dirty": bool(status)}


@functools.lru_cache(maxsize=1)
def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "anserini": _anserini_jar(),
        "benchmark": _version(DISTRIBUTION),
        **_commit(),
    }


def differences(recorded: dict[str, Any] | None, current: dict[str, Any] | None = None) -> list[str]:
    """'torch 2.12.0 (now 2.13.0)' for each version that differs; commits are not compared."""
    current = current or environment()
    if not recorded:
        return ["no versions recorded"]
    out = []
    if recorded.get("python") != current["python"]:
        out.append(f"python {recorded.get('python')} (now {current['python']})")
    for name, now in current["packages"].items():
        then = (recorded.get("packages") or {}).get(name)
        if then != now:
            out.append(f"{name} {then} (now {now})")
    if recorded.get("anserini") != current["anserini"]:
        out.append(f"{recorded.get('anserini')} (now {current['anserini']})")
    return out
