"""Time spent inside a call, as wall and as the process's CPU: ``timing`` dictionaries that stages record and
``python -m benchmark.perf search-stage`` divides by."""

from __future__ import annotations

import time


def clock() -> tuple[float, float]:
    """(wall, process CPU) seconds now: where ``add_time`` counts from. The CPU clock (a system call) is read
    first here and last in ``add_time``, so the wall between does not count it."""
    cpu = time.process_time()
    return time.perf_counter(), cpu


def add_time(timing: dict[str, float] | None, began: tuple[float, float], key: str) -> None:
    """``timing[key + "_s"]`` += the wall seconds since ``began``, ``timing[key + "_cpu_s"]`` += the process's CPU
    seconds, every thread's (a JVM's compiler and collector threads work for the call as much as its own)."""
    if timing is not None:
        wall = time.perf_counter()
        cpu = time.process_time()
        timing[f"{key}_s"] = timing.get(f"{key}_s", 0.0) + wall - began[0]
        timing[f"{key}_cpu_s"] = timing.get(f"{key}_cpu_s", 0.0) + cpu - began[1]
