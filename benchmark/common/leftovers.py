"""Scratch files and folders (a staging folder, an old folder moved aside, a half-written export) are
named after the process that writes them, so that a later process removes those of a writer that no
longer runs: a kill leaves them behind, and nothing else ever would.

A name is ``.<name>.<what>-<pid>-<host>``, ``<host>`` a digest of this machine's name and boot. Only
scratch of this machine and boot whose pid is gone is removed; a folder shared with other machines
(NFS) keeps theirs. A reused pid keeps its scratch (it cannot be told from its writer), which errs on
the side of keeping.

A pid says nothing across PID namespaces: two containers share a host name and a boot, and each sees
the other's writers as gone. So a writer also holds ``flock`` on the scratch folder it works in
(:func:`hold`) until it is done, and scratch whose lock is held is kept whatever its pid says. The
lock lives on the folder itself, so no file appears beside it, and the kernel drops it when its holder
dies, so it never outlives the writer.
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


#: the scratch folders this process works in, each with the descriptor that holds its lock
_HELD: dict[str, int] = {}


def hold(folder: Path | str) -> None:
    """Hold ``flock`` on the scratch folder ``folder`` until :func:`let_go`, so that no sweeper in any PID
    namespace removes it while this process writes into it. A filesystem that cannot lock a folder (NFS)
    leaves the pid rule alone to judge it."""
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    _HELD[str(folder)] = fd


def let_go(folder: Path | str) -> None:
    """Release what :func:`hold` took on ``folder`` (a no-op when nothing is held)."""
    fd = _HELD.pop(str(folder), None)
    if fd is not None:
        os.close(fd)


def _held(path: Path) -> bool:
    """Whether some live process, in this PID namespace or another, holds the lock of ``path``."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # cannot be locked here: the pid rule judges it
        return False
    finally:
        os.close(fd)  # also releases the probe's own lock
    return False


def stale(name: str, folder: Path | str | None = None) -> bool:
    """Whether ``name`` is scratch of a writer on this machine and boot that no longer runs; with ``folder``
    (where ``name`` lies), scratch whose lock a live writer holds is never stale."""
    m = _NAME.match(name)
    gone = (
        m is not None
        and m.group("host") == HOST
        and int(m.group("pid")) != os.getpid()
        and not _alive(int(m.group("pid")))
    )
    return gone and not (folder is not None and _held(Path(folder) / name))


def sweep_leftovers(folder: Path | str) -> list[str]:
    """Remove the stale scratch in ``folder`` (not below it); returns the names removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        if stale(name, folder):
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
