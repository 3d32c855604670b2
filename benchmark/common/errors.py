"""One error type whose message is the single line a user sees."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class BenchmarkError(Exception):
    """A user-facing error: the message names the bad value, the valid options and the fix."""


def unknown(kind: str, value: object, options: Iterable[str], fix: str = "") -> BenchmarkError:
    """Build the standard 'unknown X' error, with a close-match hint."""
    opts = sorted(str(o) for o in options)
    hint = difflib.get_close_matches(str(value), opts, n=1)
    msg = f"unknown {kind} {value!r}"
    if hint:
        msg += f" (did you mean {hint[0]!r}?)"
    msg += f"; valid: {', '.join(opts)}"
    if fix:
        msg += f". {fix}"
    return BenchmarkError(msg)


class Unavailable(str):
    """A problem that is only being offline: a dataset or model neither cached here nor reachable. It reads as
    its whole line; a list of several shows ``short`` (ending in where to put the files), after a summary."""

    kind: str
    name: str
    short: str

    def __new__(cls, text: str, *, kind: str, name: str, short: str) -> Unavailable:
        self = super().__new__(cls, text)
        self.kind, self.name, self.short = kind, name, short
        return self
