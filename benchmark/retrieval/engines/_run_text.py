"""Run lines printed by compiled code: the bytes ``format_run`` writes for hits at integer scores, with no Python
string a hit (``exhaustive`` and ``pisa``'s ``run_lines``). numba, imported only when one of them searches.

Every piece of a line (the query's ``QID Q0 ``, the id, the tail after the score) is copied in 16-byte moves
that may run past the piece's end: each source has ``PAD`` bytes of room past its last piece, and the output
``PAD`` past the last line, so a move never reads or writes outside its array, and the next piece overwrites
what a move left past its own end. All of a line's code is in this one file, so numba's cache (kept per file)
never pairs one function's new machine code with another's old.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

PAD = 16  # the bytes of room a 16-byte move may use past a piece's end
_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), dtype=np.uint8)  # "00".."99"


def padded(text: bytes) -> Any:
    """``text`` as uint8 with ``PAD`` bytes of room past its end."""
    out = np.zeros(len(text) + PAD, dtype=np.uint8)
    out[: len(text)] = np.frombuffer(text, dtype=np.uint8)
    return out


def room(hits: int, id_bytes: int, prefix: int, tail: int) -> int:
    """An upper bound on the bytes ``hits`` lines take (ids ``id_bytes`` long in all), with the moves' room:
    a line is the prefix, the id, two spaces, at most 20 digits of rank and 20 of score, the tail."""
    return hits * (prefix + tail + 42) + id_bytes + 2 * PAD


class Printer:
    """A batch's run lines: each query's printed by a compiled writer (``numbered``, ``by_score``) into one
    buffer, grown to the largest query's lines and reused, and decoded from it as one string."""

    def __init__(self) -> None:
        from benchmark.formats.trec_run import INTEGER_TAIL

        self.tail = INTEGER_TAIL.encode()
        self._tail = padded(self.tail)
        self._buffer = np.empty(0, dtype=np.uint8)

    def lines(self, qid: str, hits: int, id_bytes: int, writer: Any, *arrays: Any) -> list[str]:
        """The query's ``hits`` lines (their ids ``id_bytes`` long in all) as ``writer(*arrays, prefix, prefix
        length, tail, tail length, out)`` prints them; none without hits."""
        if not hits:
            return []
        prefix = f"{qid} Q0 ".encode()
        need = room(hits, id_bytes, len(prefix), len(self.tail))
        if self._buffer.shape[0] < need:
            self._buffer = np.empty(2 * need, dtype=np.uint8)
        end = writer(*arrays, padded(prefix), len(prefix), self._tail, len(self.tail), self._buffer)
        return [str(self._buffer[:end].data, "utf-8")]  # decoded from the buffer: no bytes copy between


@intrinsic
def _move16(typingctx, dst, dpos, src, spos):  # type: ignore[no-untyped-def]
    """``dst[dpos:dpos + 16] = src[spos:spos + 16]`` as one unaligned move (no bounds check: the caller's)."""
    signature = types.void(dst, types.int64, src, types.int64)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        to = context.make_array(sig.args[0])(context, builder, args[0])
        source = context.make_array(sig.args[2])(context, builder, args[2])
        size = context.get_constant(types.intp, 16)
        cgutils.raw_memcpy(builder, builder.gep(to.data, [args[1]]), builder.gep(source.data, [args[3]]), size, 1)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(nogil=True, cache=True, inline="always")
def _put(out, p, source, s, length):  # type: ignore[no-untyped-def]
    """``source[s:s + length]`` at ``out[p:]`` in 16-byte moves; returns the end."""
    j = 0
    while j < length:
        _move16(out, p + j, source, s + j)  # type: ignore[call-arg]  # numba passes the typing context
        j += 16
    return p + length


@numba.njit(nogil=True, cache=True, inline="always")
def _digits(out, p, v):  # type: ignore[no-untyped-def]
    """``v`` (>= 0) in decimal at ``out[p:]``, two digits a division; returns the end."""
    if v < 10:
        out[p] = 48 + v
        return p + 1
    width = 0
    m = v
    while m > 0:
        m //= 10
        width += 1
    end = p + width
    q = end
    while v >= 100:
        r = v % 100
        v //= 100
        q -= 2
        out[q] = _PAIRS[2 * r]
        out[q + 1] = _PAIRS[2 * r + 1]
    if v >= 10:
        out[q - 2] = _PAIRS[2 * v]
        out[q - 1] = _PAIRS[2 * v + 1]
    else:
        out[q - 1] = 48 + v
    return end


@numba.njit(nogil=True, cache=True)
def lines(printed, first, last, ids, prefix, prefix_length, tail, tail_length, out):  # type: ignore[no-untyped-def]
    """Hit i's line, ranked i + 1: ``prefix`` (``QID Q0 ``), its id ``ids[first[i]:last[i]]``, the rank, its
    score ``printed[i]`` and ``tail``; returns the lines' length in bytes."""
    p = 0
    for i in range(printed.shape[0]):
        p = _put(out, p, prefix, 0, prefix_length)
        p = _put(out, p, ids, first[i], last[i] - first[i])
        out[p] = 32
        p = _digits(out, p + 1, i + 1)
        out[p] = 32
        p = _digits(out, p + 1, printed[i])
        p = _put(out, p, tail, 0, tail_length)
    return p


@numba.njit(nogil=True, cache=True)
def numbered(printed, numbers, ids, starts, touched, prefix, prefix_length, tail, tail_length, out):  # type: ignore[no-untyped-def]
    """``lines`` for hits given by document number (document d's id is ``ids[starts[d]:starts[d + 1]]``);
    returns the length. Every id is touched before any is copied, so that the cache misses on a large
    collection's ids overlap rather than follow one another; a sum of the ids' first bytes is added to
    ``touched[0]`` so that the compiler cannot drop the touches (with ``sum & 0`` it did, and the misses came one
    at a time: 0.13 against 0.05 ms a query at 1M documents)."""
    n = numbers.shape[0]
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    for i in range(n):
        first[i] = starts[numbers[i]]
        last[i] = starts[numbers[i] + 1]
    total = 0
    for i in range(n):
        total += ids[first[i]]
    touched[0] += total
    return lines(printed, first, last, ids, prefix, prefix_length, tail, tail_length, out)


@numba.njit(nogil=True, cache=True)
def separated(ids, count, separator, first, last):  # type: ignore[no-untyped-def]
    """Where each of ``count`` ids joined by ``separator`` lies in ``ids`` (the join and ``PAD`` bytes of room):
    into ``first`` and ``last``. Returns False where the join holds another number of separators (an id holds
    the separator itself), and the places are then not known."""
    end = ids.shape[0] - PAD
    k = 0
    first[0] = 0
    for p in range(end):
        if ids[p] == separator:
            if k == count - 1:
                return False
            last[k] = p
            k += 1
            first[k] = p + 1
    if k != count - 1:
        return False
    last[k] = end
    return True


@numba.njit(nogil=True, cache=True, inline="always")
def _before(ids, first, last, a, b):  # type: ignore[no-untyped-def]
    """Whether id ``a`` sorts before id ``b`` as Python's strings do (UTF-8 bytes keep the code points' order)."""
    la = last[a] - first[a]
    lb = last[b] - first[b]
    for j in range(min(la, lb)):
        x = ids[first[a] + j]
        y = ids[first[b] + j]
        if x != y:
            return x < y
    return la < lb


@numba.njit(nogil=True, cache=True)
def _sort_run(order, lo, hi, ids, first, last, spare):  # type: ignore[no-untyped-def]
    """``order[lo:hi]`` sorted by id: insertion for a short run, otherwise bottom-up merges through ``spare``."""
    if hi - lo <= 24:
        for i in range(lo + 1, hi):
            x = order[i]
            j = i - 1
            while j >= lo and _before(ids, first, last, x, order[j]):
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
        return
    width = 1
    source, target = order, spare
    swapped = False
    while width < hi - lo:
        for left in range(lo, hi, 2 * width):
            mid = min(left + width, hi)
            right = min(left + 2 * width, hi)
            i, j, t = left, mid, left
            while i < mid and j < right:
                if _before(ids, first, last, source[j], source[i]):  # equal ids keep their order (stable)
                    target[t] = source[j]
                    j += 1
                else:
                    target[t] = source[i]
                    i += 1
                t += 1
            while i < mid:
                target[t] = source[i]
                i += 1
                t += 1
            while j < right:
                target[t] = source[j]
                j += 1
                t += 1
        source, target = target, source
        swapped = not swapped
        width *= 2
    if swapped:  # the sorted run is in ``spare``
        order[lo:hi] = spare[lo:hi]


@numba.njit(nogil=True, cache=True)
def by_score(printed, first, last, ids, prefix, prefix_length, tail, tail_length, out):  # type: ignore[no-untyped-def]
    """``lines`` for hits given best first by score (PISA's order), each run of equal scores put in id order
    first, as ``ranked`` puts ties."""
    n = printed.shape[0]
    order = np.arange(n)
    spare = np.empty(n, np.int64)
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and printed[hi] == printed[lo]:
            hi += 1
        if hi - lo > 1:
            _sort_run(order, lo, hi, ids, first, last, spare)
        lo = hi
    return lines(printed, first[order], last[order], ids, prefix, prefix_length, tail, tail_length, out)
