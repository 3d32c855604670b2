"""Names and paths read from records (``results.json``, a stage's ``config.json``) or derived from them
stay inside the folder they belong to: a results folder received from someone else must never make a
rebuild write, or read, outside itself."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from benchmark.common.errors import BenchmarkError


def escape(rel: str) -> str | None:
    """Why ``rel`` cannot name a place inside a folder (absolute, a ``..`` part, a backslash, a drive, a NUL,
    empty), or None. Symlinks are ``confined``'s to check: they need the folder."""
    if not isinstance(rel, str) or not rel.strip():
        return "it is empty"
    if "\0" in rel or "\\" in rel or re.match(r"^[A-Za-z]:", rel):
        return "it holds a NUL, a backslash or a drive"
    if rel.startswith(("/", "~")):
        return "it is absolute"
    if ".." in PurePosixPath(rel).parts:
        return "it climbs out with '..'"
    return None


def confined(folder: Path | str, rel: str, what: str) -> Path:
    """``folder / rel``, refused in one line unless it stays inside ``folder``: relative, no ``..``, and no
    symlink on the way (or at the end) that resolves outside it."""
    folder = Path(folder)
    reason = escape(rel)
    if reason is None:
        root, resolved = folder.resolve(), (folder / rel).resolve()
        if resolved != root and root not in resolved.parents:
            reason = f"a symlink on its way resolves to {resolved}"
    if reason:
        raise BenchmarkError(
            f"{what} {rel!r} leads outside {folder} ({reason}); nothing is written or read there. "
            "A folder only ever writes inside itself: remove or correct that entry"
        )
    return folder / rel
