"""A set of string ids in bounded memory: the corpus-sized membership and duplicate tests of the streaming stages.

A Python ``set`` of a million short ids costs about 100 MB, and even 16-byte digests held in memory grow
with the corpus (141 MB at MS MARCO's 8.8M passages, several times that while a sorted column merges).
Here each id is a 128-bit BLAKE2b digest. Past ``BUFFER`` ids the digests spill to ``BUCKETS`` files by
their first byte, and each bucket is sorted on its own into one sorted file; a question reads the buckets
it needs. The set is built and asked in the memory of one buffer and one bucket, whatever its size.
Two different ids share a digest with probability about n²/2¹²⁹ (1e-25 at 8.8M ids), the odds git's
object names rest on.

Building and asking are two phases: ``add`` every id, then ask (``missing``, ``in``, ``len``,
``repeats``); the first question sorts what was added.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

BUFFER = 1 << 16  # digests held in memory before they spill (1.5 MB); a set no larger never touches disk
BUCKETS = 256  # spill files, by a digest's first byte: a bucket holds 1/256 of the ids (550 KB at 8.8M)
_SHIFT = np.uint64(56)


def digest(text: str) -> tuple[int, int]:
    """The id's 128-bit digest as (high, low) 64-bit words, the columns the set sorts by."""
    raw = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


def digests(texts: Sequence[str]) -> np.ndarray:
    """``digest`` of each text as rows of an (n, 2) uint64 array."""
    raw = b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def _member(high: np.ndarray, low: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """Which rows of ``asked`` are in the sorted columns: a search on the high word, then the low word
    over its equal run (one entry but for a 64-bit coincidence, 2e-6 at 8.8M ids, walked exactly)."""
    left = np.searchsorted(high, asked[:, 0], "left")
    right = np.searchsorted(high, asked[:, 0], "right")
    found = np.zeros(len(asked), dtype=bool)
    one = right - left == 1
    found[one] = low[left[one]] == asked[one, 1]
    for i in np.nonzero(right - left > 1)[0]:
        found[i] = bool((low[left[i] : right[i]] == asked[i, 1]).any())
    return found


def _sort_unique(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo, ordinal) rows → the distinct (hi, lo) in order, and the ordinals of the rows that
    repeat an earlier row's digest (the first of each digest, by ordinal, is the one kept)."""
    rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]
    same = (rows[1:, 0] == rows[:-1, 0]) & (rows[1:, 1] == rows[:-1, 1])
    repeats = rows[1:, 2][same]
    keep = np.concatenate([[True], ~same]) if len(rows) else np.zeros(0, dtype=bool)
    return np.ascontiguousarray(rows[keep, :2]), repeats


class IdSet:
    """``add`` string ids, then ask ``missing``, ``in``, ``len`` and ``repeats`` (see the module's note).

    Args:
        ids: ids to add at once.
        spill: the folder under which a large set spills its buckets (default: the system's temporary folder).
    """

    def __init__(self, ids: Iterable[str] = (), spill: str | Path | None = None) -> None:
        self._spill_under = spill
        self._folder: Path | None = None
        self._raw = bytearray()
        self._added = 0  # ids added so far: each one's ordinal
        self._buffered = 0
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # the whole set, sorted, when it never spilled
        self._offsets: np.ndarray | None = None  # each bucket's start in the sorted file, when it spilled
        self._repeats = np.zeros(0, dtype=np.uint64)
        for i in ids:
            self.add(i)

    # ------------------------------------------------------------------ building

    def add(self, text: str) -> None:
        """Add ``text`` (a repeat is kept as a repeat: ``repeats`` names it once the set is asked)."""
        if self._sorted is not None or self._offsets is not None:
            raise RuntimeError("IdSet.add after the set was asked: add every id first")
        self._raw += hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        self._buffered += 1
        self._added += 1
        if self._buffered >= BUFFER:
            self._spill()

    def _rows(self) -> np.ndarray:
        pairs = np.frombuffer(bytes(self._raw), dtype="<u8").reshape(-1, 2)
        rows = np.empty((len(pairs), 3), dtype=np.uint64)
        rows[:, :2] = pairs
        rows[:, 2] = np.arange(self._added - len(pairs), self._added, dtype=np.uint64)
        self._raw, self._buffered = bytearray(), 0
        return rows

    def _bucket_file(self, bucket: int) -> Path:
        assert self._folder is not None
        return self._folder / f"bucket-{bucket:03d}"

    def _spill(self) -> None:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="benchmark-ids-", dir=self._spill_under))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._folder, True)
        rows = self._rows()
        buckets = (rows[:, 0] >> _SHIFT).astype(np.intp)
        rows = rows[np.argsort(buckets, kind="stable")]
        ends = np.cumsum(np.bincount(buckets, minlength=BUCKETS))
        for b in np.nonzero(np.diff(ends, prepend=0))[0]:
            with open(self._bucket_file(int(b)), "ab") as fh:
                fh.write(rows[(ends[b - 1] if b else 0) : ends[b]].tobytes())

    def _finish(self) -> None:
        """Sort what was added (once): in memory if it never spilled, else bucket by bucket into one file."""
        if self._sorted is not None or self._offsets is not None:
            return
        if self._folder is None:
            unique, repeats = _sort_unique(self._rows())
            self._repeats = np.sort(repeats)
            self._sorted = (np.ascontiguousarray(unique[:, 0]), np.ascontiguousarray(unique[:, 1]))
            return
        self._spill()
        offsets, found_again = [0], []
        with open(self._folder / "sorted", "wb") as out:
            for b in range(BUCKETS):
                path = self._bucket_file(b)
                if path.is_file():
                    unique, again = _sort_unique(np.fromfile(path, dtype=np.uint64).reshape(-1, 3))
                    out.write(unique.tobytes())
                    found_again.append(again)
                    path.unlink()
                    offsets.append(offsets[-1] + len(unique))
                else:
                    offsets.append(offsets[-1])
        self._offsets = np.array(offsets, dtype=np.int64)
        self._repeats = np.sort(np.concatenate(found_again)) if found_again else self._repeats

    # ------------------------------------------------------------------ asking

    def missing(self, ids: Iterable[str]) -> set[str]:
        """The ids of ``ids`` that are not in the set: a run's block of hits checked in one vectorised
        search per bucket (7M hits took 127 s one ``in`` at a time, at 100,000 documents)."""
        self._finish()
        unique = list(dict.fromkeys(ids))
        if not unique:
            return set()
        asked = digests(unique)
        if self._sorted is not None:
            found = _member(*self._sorted, asked)
        else:
            found = self._found_in_file(asked)
        return {text for text, hit in zip(unique, found.tolist(), strict=True) if not hit}

    def _found_in_file(self, asked: np.ndarray) -> np.ndarray:
        assert self._offsets is not None and self._folder is not None
        buckets = (asked[:, 0] >> _SHIFT).astype(np.intp)
        order = np.argsort(buckets, kind="stable")
        ends = np.cumsum(np.bincount(buckets, minlength=BUCKETS))
        found = np.zeros(len(asked), dtype=bool)
        with open(self._folder / "sorted", "rb") as fh:
            for b in np.nonzero(np.diff(ends, prepend=0))[0]:
                start, stop = int(self._offsets[b]), int(self._offsets[b + 1])
                if stop == start:
                    continue
                fh.seek(16 * start)
                stored = np.fromfile(fh, dtype=np.uint64, count=2 * (stop - start)).reshape(-1, 2)
                rows = order[(ends[b - 1] if b else 0) : ends[b]]
                found[rows] = _member(
                    np.ascontiguousarray(stored[:, 0]), np.ascontiguousarray(stored[:, 1]), asked[rows]
                )
        return found

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and not self.missing([text])

    def __len__(self) -> int:
        """How many distinct ids were added."""
        self._finish()
        if self._sorted is not None:
            return len(self._sorted[0])
        assert self._offsets is not None
        return int(self._offsets[-1])

    def repeats(self) -> np.ndarray:
        """The ordinals (0-based, in the order of ``add``) of the ids that an earlier ``add`` already gave."""
        self._finish()
        return self._repeats

    def discard(self) -> None:
        """Remove the spilled files now (they are also removed when the set is collected)."""
        if self._folder is not None:
            self._cleanup()
