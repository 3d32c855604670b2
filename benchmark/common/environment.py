"""What computed a stage: package versions, the Anserini jar, the project's commit and torch's numerics.

Recorded in every stage's ``config.json``; ``--check`` warns when cached stages come from other
versions (or other numerics) than the ones here now.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = (
    "torch",
    "transformers",
    "sentence-transformers",
    "accelerate",
    "pyserini",
    "ir_measures",
    "ir_datasets",
    "numpy",
)
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
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "benchmark"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head or None, "dirty": bool(status)}


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "anserini": _anserini_jar(),
        "benchmark": _version(DISTRIBUTION),
        **_commit(),
    }


#: /proc/cpuinfo vendor_id → the machine class the perf tables are kept per (results/perf/perf.<class>.md)
VENDOR_TO_CLASS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
#: CPU flags that decide which screens of the vocabulary head can be fast, named in the tables' header
DECIDING_FLAGS = ("avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "avx512_vnni", "avx_vnni")


def machine_class() -> tuple[str, str]:
    """(class, description): the CPU class and what it is, from /proc/cpuinfo (``other`` elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "other", "CPU model unknown"
    fields: dict[str, str] = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    have = [f for f in DECIDING_FLAGS if f in flags]
    cls = VENDOR_TO_CLASS.get(fields.get("vendor_id", ""), "other")
    return (
        cls,
        f"{fields.get('model name', 'CPU model unknown')} "
        f"({', '.join(have) or 'none of ' + ', '.join(DECIDING_FLAGS)})",
    )


def numerics() -> dict[str, Any] | None:
    """The CPU (model and deciding flags), the kernels torch dispatches to (its CPU capability) and its
    intra-op thread count, or None where torch was never imported (the stage ran no model).

    They decide the rounding of CPU arithmetic: bert-tiny's gradients differ bitwise between 1 and 2
    threads, and a forward's GEMM kernels differ between CPUs. So trained weights and encodings (and the
    non-zeros, FLOPS and metrics downstream) are bit-reproducible under the same id only where these (and
    the package versions) match; elsewhere they agree to rounding. Stage ids do not include them, so that
    a cache is shared across machines."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {
        "cpu": machine_class()[1],
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "intra_op_threads": torch.get_num_threads(),
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
    }


def environment() -> dict[str, Any]:
    return {**_versions(), "numerics": numerics()}


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
    then, now = recorded.get("numerics"), current.get("numerics")
    if then and now:
        for key, name in (
            ("cpu", "CPU"),
            ("torch_cpu_capability", "torch CPU capability"),
            ("intra_op_threads", "intra-op threads"),
            ("cuda", "CUDA"),
        ):
            if then.get(key) != now.get(key):
                out.append(f"{name} {then.get(key)} (now {now.get(key)})")
    return out
