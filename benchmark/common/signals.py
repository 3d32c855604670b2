"""Signals: SIGTERM raised as an exception (``Interrupted``) so that a run unwinds as on Ctrl-C, and
blocks that run whole (``uninterrupted``), their signals delivered when they end."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Interrupted(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that ``finally`` blocks stop child processes."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: signals that unwind the stack as SIGINT does (SIGHUP: the terminal of an interactive run closed)
HANDLED = (signal.SIGTERM, signal.SIGHUP)


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP unwind the stack as SIGINT does: claims are released, writer processes and the JVM
    indexer are stopped, and the partial folders stay for the rerun."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    for signum in HANDLED:
        signal.signal(signum, handler)


def interrupted_exit(exc: BaseException, what: str) -> int:
    """The one line a command prints when a signal stopped it (``what``: what was kept, what to rerun), and
    its exit status, 128 + the signal's number."""
    import sys

    name = exc.args[0] if isinstance(exc, Interrupted) else "SIGINT"
    print(f"interrupted ({name}): {what}", file=sys.stderr)
    return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Run a block whole: a SIGTERM or SIGINT arriving inside it is delivered when it ends. For library
    code that is not safe against an exception at any bytecode: in matplotlib's drawing an interrupt
    surfaced as an IndexError traceback, or was swallowed by a weakref callback and lost."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    pending: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in (*HANDLED, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])  # now the usual handler runs: Interrupted, KeyboardInterrupt
