"""Inputs from outside ``runs/`` are read once: copied into the stage's folder, hashed as they are copied,
and compared with the content the plan fingerprinted (the stage's id) before anything reads the copy.

A plan fingerprints a run file or a local dataset when it starts, and its stage reads it later, perhaps
hours later. Read twice, an input edited in between (and restored before a rerun) gave a stage whose
output came from other bytes than its id says, served again on every rerun, ``--verify`` included. A
copy hashed in the same pass is the one version that is both checked and read.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from benchmark.common.errors import BenchmarkError

_BUFFER = 1 << 20


def not_a_regular_file(path: Path | str, what: str) -> str | None:
    """One line when ``path`` is a pipe, a device or a socket (``<(zcat …)``, a named pipe): such an input can be
    read once only, or blocks until a writer comes, so it can be neither fingerprinted nor copied after; else None.
    ``os.stat`` does not open the file, so a named pipe without a writer does not block here."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: the reader says which
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return (
        f"{what} {str(path)!r} is {kind}, not a regular file: it can be read only once, and the run reads it when "
        f"planned and again when its stage runs; save it to a file first (e.g. zcat run.gz > run.trec) and pass that"
    )


def copy_hashed(source: Path | str, target: Path | str) -> str:
    """Copy ``source`` to ``target`` in one read; the sha256 of the bytes copied."""
    problem = not_a_regular_file(source, "input")
    if problem:
        raise BenchmarkError(problem)
    digest = hashlib.sha256()
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(_BUFFER):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def changed_since_planned(what: str, planned: str, copied: str) -> BenchmarkError:
    """The one line for an input whose content is not the one the stage's id was computed from."""
    return BenchmarkError(
        f"{what} changed after this run was planned (content {copied[:16]}, planned {planned[:16]}): "
        "nothing was computed from it. Leave it unchanged while a run reads it, and rerun the same "
        "command to use its current content"
    )
