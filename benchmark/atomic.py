"""Atomic file writes (as ir_datasets' ``finialized_file``): write a temporary sibling, then ``os.replace``.

A reader, or a rerun after a kill, sees the old file or the whole new one, never half of one; an
exception while writing removes the temporary file. Use it wherever a file is published outside a
stage's ``.partial`` folder (the stage folder itself is published by one rename).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_write(path: Path | str, mode: str = "w", encoding: str | None = "utf-8", newline: str | None = None,
                 fsync: bool = True) -> Iterator[IO[Any]]:
    """``with atomic_write(path) as fh: ...``: ``path`` appears whole when the block ends, or not at all."""
    path = Path(path)
    tmp = _tmp(path)
    binary = "b" in mode
    try:
        with open(tmp, mode, encoding=None if binary else encoding, newline=None if binary else newline) as fh:
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
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n",
                            delimiter=delimiter)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in columns})
    return buf.getvalue()


def write_csv(path: Path | str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str], delimiter: str = ",") -> None:
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
