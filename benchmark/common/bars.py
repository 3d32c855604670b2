"""Progress bars on a terminal only. Redrawn bars in a log file are kilobytes of carriage returns
(a 2.5-minute run wrote 17 KB of them), so where stderr is not a terminal a bar is a plain line
every ``PLAIN_EVERY_S`` seconds instead: ``encode docs 0: 3200/5183 doc (62%), 12s, 270 doc/s``."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

PLAIN_EVERY_S = 10.0


def on_terminal(stream: TextIO | None = None) -> bool:
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class PlainBar:
    """What a bar says, as a line at most every ``every`` seconds (and a last one at the end when any
    was written): the subset of tqdm's interface the harness uses."""

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        initial: int = 0,
        every: float = PLAIN_EVERY_S,
        stream: TextIO | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.iterable, self.desc, self.unit, self.every = iterable, desc, unit, every
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.n, self.initial = total, initial, initial
        self.stream, self.clock = stream, clock
        self.start = self.last = clock()
        self.lines = 0
        self.shown = initial  # the count the last line showed

    def _write(self, text: str) -> None:
        stream = sys.stderr if self.stream is None else self.stream
        stream.write(text + "\n")
        stream.flush()

    def line(self) -> str:
        elapsed = self.clock() - self.start
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        return (
            f"{self.desc + ': ' if self.desc else ''}{done} {self.unit}{share}, {elapsed:.0f}s, {rate:.3g} "
            f"{self.unit}/s"
        )

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last, self.shown = now, self.n
            self.lines += 1
            self._write(self.line())

    def write(self, text: str) -> None:
        self._write(text)

    def close(self) -> None:
        if self.lines and self.n != self.shown:  # a long run of it: say where it ended
            self.shown = self.n
            self._write(self.line())
        self.lines = 0

    def __iter__(self) -> Iterator[Any]:
        assert self.iterable is not None
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __enter__(self) -> PlainBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
    disable: bool = False,
    mininterval: float = 0.1,
) -> Any:
    """A tqdm bar on a terminal, a ``PlainBar`` elsewhere; nothing at all with ``disable``."""
    from tqdm.auto import tqdm

    if disable:
        return tqdm(iterable, total=total, disable=True)
    if on_terminal():
        return tqdm(
            iterable, total=total, desc=desc, unit=unit, initial=initial, mininterval=mininterval, dynamic_ncols=True
        )
    return PlainBar(iterable, total, desc, unit, initial)
