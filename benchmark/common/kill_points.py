"""Named kill points for the kill-anywhere tests: ``BENCHMARK_KILL_AT=name[#n][,name[#n]…]`` SIGKILLs
the process the n-th time (default 1st) execution passes ``point(name)``. Unset, a point costs one
dict lookup.

With ``BENCHMARK_KILL_ONCE=DIR`` each kill happens once across every process that shares DIR (a
cluster's workers): the first process to reach it creates ``DIR/<name>#<n>`` with ``O_EXCL`` and
dies; the retried task passes the point alive.

``BENCHMARK_FAIL_AT=name[,name…]`` raises ``InjectedFailure`` at every pass instead: a stage that
fails with an error (not a dead worker), which no retry cures.
"""

from __future__ import annotations

import os
import signal

_passes: dict[str, int] = {}


class InjectedFailure(RuntimeError):
    """Raised at a point named in ``BENCHMARK_FAIL_AT``."""


def point(name: str) -> None:
    failing = os.environ.get("BENCHMARK_FAIL_AT")
    if failing and name in failing.split(","):
        raise InjectedFailure(f"injected failure at {name} (BENCHMARK_FAIL_AT)")
    target = os.environ.get("BENCHMARK_KILL_AT")
    if not target:
        return
    wanted = [int(nth or 1) for want, _, nth in (item.partition("#") for item in target.split(",")) if want == name]
    if not wanted:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] in wanted and _first(f"{name}#{_passes[name]}"):
        os.kill(os.getpid(), signal.SIGKILL)


def _first(label: str) -> bool:
    folder = os.environ.get("BENCHMARK_KILL_ONCE")
    if not folder:
        return True
    try:
        os.close(os.open(os.path.join(folder, label.replace(":", "_")), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True
