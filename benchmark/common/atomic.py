"""Atomic file writes (as ir_datasets' ``finialized_file``): write a temporary sibling, then ``os.replace``.

A reader, or a rerun after a kill, sees the old file or the whole new one, never half of one; an
exception while writing removes the temporary file. Use it wherever a file is published outside a
stage's ``.partial`` folder (the stage folder itself is published by one rename). A folder of files
that belong together (a suite's results) is built beside its place and swapped in whole
(``replace_folder``).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_write(
    path: Path | str,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = None,
    fsync: bool = True,
    buffering: int = -1,
) -> Iterator[IO[Any]]:
    """``with atomic_write(path) as fh: ...``: ``path`` appears whole when the block ends, or not at all.
    ``buffering`` as ``open``'s (a writer of many mid-sized pieces passes a larger buffer: fewer, larger writes)."""
    path = Path(path)
    tmp = _tmp(path)
    binary = "b" in mode
    try:
        with open(
            tmp, mode, buffering, encoding=None if binary else encoding, newline=None if binary else newline
        ) as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary sibling path for writers that want a file name (numpy, matplotlib); renamed on success."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")  # keeps the suffix: np.save, savefig use it
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


RENAME_EXCHANGE = 2  # linux/fs.h: swap two paths in one step


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically (Linux renameat2); False where unsupported (NFS, other OSes)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_folder(new: Path | str, target: Path | str) -> Path | None:
    """Put the folder ``new`` at ``target``; returns where the old ``target`` now is (for the caller
    to delete), or None if there was none. One atomic exchange where the filesystem has it; else the
    old folder is renamed aside first (a reader may then briefly find no folder, never a mixed one)."""
    from benchmark.common import kill_points
    from benchmark.common.leftovers import scratch_name

    new, target = Path(new), Path(target)
    if not target.exists():
        os.replace(new, target)
        return None
    if _exchange(new, target):
        return new
    aside = target.with_name(scratch_name(target.name, "old"))
    os.replace(target, aside)
    kill_points.point("folder:swap")
    os.replace(new, target)
    return aside


#: where the folder lock lives when the parent folder itself cannot be locked (NFS locks need a file)
LOCK = ".replace.lock"


@contextlib.contextmanager
def folder_lock(parent: Path | str) -> Iterator[None]:
    """An exclusive lock on the folders replaced in ``parent`` (``flock`` on the folder itself, so no file
    appears beside the suites; released when its holder dies). A rebuild that reads a folder and the run that
    publishes it take turns, so neither swaps its copy over the other's newer one."""
    import fcntl

    fd = os.open(parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a filesystem that locks files only (NFS emulates flock with write locks)
            os.close(fd)
            fd = os.open(Path(parent) / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def not_a_folder(target: Path | str) -> str | None:
    """One line when ``target`` exists as something other than a folder (a user's file, a symlink), which a
    swap would move to a hidden name; else None."""
    target = Path(target)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        what = "a symlink" if target.is_symlink() else "a file"
        return (
            f"{target} is {what}, not a folder the harness wrote; it would be replaced by the results folder: "
            "move it away, or pass another --results-dir"
        )
    return None


def replace_folder(target: Path | str, fill: Any) -> None:
    """``fill(staging)`` writes every file of a folder into a sibling staging folder, which then
    replaces ``target`` whole: a kill or an error before the swap leaves ``target`` as it was. The whole
    of it holds ``folder_lock`` (``fill`` may read ``target``); scratch that killed writers left beside
    it is removed first."""
    import shutil

    from benchmark.common import kill_points
    from benchmark.common.errors import BenchmarkError
    from benchmark.common.leftovers import hold, let_go, scratch_name, sweep_leftovers

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(target.parent):
        problem = not_a_folder(target)
        if problem:
            raise BenchmarkError(problem)
        sweep_leftovers(target.parent)
        staging = target.with_name(scratch_name(target.name, "partial"))
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        hold(staging)
        try:
            fill(staging)
            kill_points.point("folder:staged")
            old = swap_folder(staging, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            let_go(staging)
            shutil.rmtree(staging, ignore_errors=True)


def write_lines(path: Path | str, lines: Iterable[str]) -> int:
    """Each item of ``lines`` plus a newline; returns how many were written."""
    n = 0
    with atomic_write(path) as fh:
        for line in lines:
            fh.write(line + "\n")
            n += 1
    return n


def write_text(path: Path | str, text: str) -> None:
    with atomic_write(path) as fh:
        fh.write(text)


def write_json(path: Path | str, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_jsonl(path: Path | str, rows: Iterable[dict[str, Any]]) -> int:
    return write_lines(path, (json.dumps(row, ensure_ascii=False) for row in rows))


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], delimiter: str = ",") -> str:
    """Rows as CSV text with a header (the one CSV writer: results tables, telemetry, logs)."""
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n", delimiter=delimiter
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in columns})
    return buf.getvalue()


def write_csv(
    path: Path | str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str], delimiter: str = ","
) -> None:
    write_text(path, csv_text(rows, columns, delimiter))


def save_npy(path: Path | str, array: Any) -> None:
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, array)


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> None:
    """``fig.savefig`` to a temporary name, then rename; the format comes from the suffix."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **kwargs)
