"""Scratch files and folders (a staging folder, an old folder moved aside, a half-written export) are
named after the process that writes them, so that a later process removes those of a writer that no
longer runs: a kill leaves them behind, and nothing else ever would.

A name is ``.<name>.<what>-<pid>-<host>``, ``<host>`` a digest of this machine's name and boot. Only
scratch of this machine and boot whose pid is gone is removed; a folder shared with other machines
(NFS) keeps theirs. A reused pid keeps its scratch (it cannot be told from its writer), which errs on
the side of keeping.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
from pathlib import Path


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


HOST = hashlib.sha1(f"{socket.gethostname()}\0{_boot_id()}".encode()).hexdigest()[:8]
KINDS = ("partial", "old", "tmp", "discard")
_NAME = re.compile(rf"^\..+\.(?:{'|'.join(KINDS)})-(?P<pid>\d+)-(?P<host>[0-9a-f]{{8}})$")


def scratch_name(name: str, what: str) -> str:
    """The hidden sibling name this process uses for ``name`` while it works (``what``: one of KINDS)."""
    assert what in KINDS, what
    return f".{name}.{what}-{os.getpid()}-{HOST}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale(name: str) -> bool:
    """Whether ``name`` is scratch of a writer on this machine and boot that no longer runs."""
    m = _NAME.match(name)
    return (
        bool(m) and m.group("host") == HOST and int(m.group("pid")) != os.getpid() and not _alive(int(m.group("pid")))
    )


def sweep_leftovers(folder: Path | str) -> list[str]:
    """Remove the stale scratch in ``folder`` (not below it); returns the names removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        if stale(name):
            path = Path(folder) / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    path.unlink()
                except OSError:
                    continue
            removed.append(name)
    return removed
