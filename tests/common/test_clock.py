"""``add_time``: the wall and the process's CPU since a start, added up per key; the CPU counts every thread."""

from __future__ import annotations

import threading
import time

from benchmark.common.clock import add_time, clock


def test_add_time_adds_wall_and_cpu_per_key_and_ignores_no_timing():
    wall, cpu = clock()
    timing: dict[str, float] = {}
    add_time(timing, (wall - 2.0, cpu - 1.0), "engine")  # a start 2 s of wall and 1 s of CPU ago
    add_time(timing, (wall - 2.0, cpu - 1.0), "engine")
    add_time(timing, clock(), "writer")
    assert set(timing) == {"engine_s", "engine_cpu_s", "writer_s", "writer_cpu_s"}
    assert timing["engine_s"] >= 4.0 and timing["engine_cpu_s"] >= 2.0  # summed over both calls
    assert 0 <= timing["writer_s"] < 1.0 and 0 <= timing["writer_cpu_s"] < 1.0
    add_time(None, clock(), "engine")  # no timing asked for: nothing to add to


def test_the_cpu_counts_another_threads_work():
    """A JVM's compiler and collector threads work for Lucene's call: the process's CPU counts them, a thread's
    own CPU (measured by the thread, ``thread_time``) at least."""
    spent = []

    def work() -> None:
        began = time.thread_time()
        total = 0
        while time.thread_time() - began < 0.2:
            total += sum(range(1000))
        spent.append(time.thread_time() - began)

    timing: dict[str, float] = {}
    began = clock()
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    add_time(timing, began, "engine")
    assert timing["engine_cpu_s"] >= spent[0] >= 0.2
