"""A full disk, in one line: the folder, what the stage had written, what is free, what it needs.

A stage that runs out of space (``ENOSPC``, or a quota's ``EDQUOT``) leaves its ``.partial`` folder
unpublished, as any failure does; this turns the ``OSError`` (or Anserini's "No space left on
device", after which the JVM still exits 0) into a line that says how much space to free.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

FULL = (errno.ENOSPC, errno.EDQUOT)
NO_SPACE = "No space left on device"  # strerror(ENOSPC), as Java's IOException says it too


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL


def full_error(where: Path | str) -> OSError:
    """The OSError a write into ``where`` would have raised (for writers in another process)."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where))


def disk_usage(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _size(n: int | float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def _free(folder: Path) -> int | None:
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return None


def disk_full_line(stage: Any, out: Path, needed: int | None) -> str:
    """``stage`` ran out of space writing into ``out``: what it wrote, what is free, what it needs."""
    out = Path(out)
    written = disk_usage(out) if out.exists() else 0
    free = _free(out)
    if needed and free is not None and needed > written + free:
        need = f"it needs about {_size(needed)} in all: free {_size(needed - written - free)} more there"
    else:
        need = f"it needs more than the {_size(written)} it wrote: free space there"
    return (
        f"no space left on the device of {out.parent}: stage {stage.id} had written {_size(written)} when it filled "
        f"({_size(free) if free is not None else 'unknown'} free); {need}, or pass --runs-dir on a larger disk, "
        "and rerun the same command (nothing of this stage was marked complete)"
    )
