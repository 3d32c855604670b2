"""Atomic file writes (as ir_datasets does): write to a temporary sibling, then ``os.replace``.

A reader, or a rerun after a kill, sees the old file or the whole new one, never half of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")


def write_lines(path: Path | str, lines: Iterable[str]) -> int:
    """Each item of ``lines`` plus a newline; returns how many were written."""
    path, n = Path(path), 0
    tmp = _tmp(path)
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return n


def write_text(path: Path | str, text: str) -> None:
    path = Path(path)
    tmp = _tmp(path)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json(path: Path | str, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_jsonl(path: Path | str, rows: Iterable[dict[str, Any]]) -> int:
    return write_lines(path, (json.dumps(row, ensure_ascii=False) for row in rows))


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> None:
    """``fig.savefig`` to a temporary name, then rename; the format comes from the suffix."""
    path = Path(path)
    tmp = _tmp(path)
    fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **kwargs)
    os.replace(tmp, path)
