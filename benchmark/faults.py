"""Named kill points for the kill-anywhere tests: ``BENCHMARK_KILL_AT=name[#n]`` SIGKILLs the process
the n-th time (default 1st) execution passes ``point(name)``. Unset, a point costs one dict lookup."""

from __future__ import annotations

import os
import signal

_passes: dict[str, int] = {}


def point(name: str) -> None:
    target = os.environ.get("BENCHMARK_KILL_AT")
    if not target:
        return
    want, _, nth = target.partition("#")
    if want != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
