"""Content fingerprints of what a stage reads from outside ``runs/``: checkpoint folders, local datasets.

A stage id must change when its input's *content* changes, not only its name, size or mtime: a
qrels file edited to the same size and given its old mtime back (``touch -r``) is a different
input. Hashing is paid once per file version: digests are memoised by (path, size, mtime_ns,
ctime_ns, inode). ctime cannot be set from user space, so any rewrite misses the memo.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from benchmark.common.atomic import atomic_write

CACHE_ENV = "BENCHMARK_CACHE_DIR"
_BUFFER = 1 << 20
_memo: dict[tuple[str, int, int, int, int], str] = {}


def cache_dir() -> Path:
    """Where memoised digests live (``$BENCHMARK_CACHE_DIR``, else ``~/.cache/benchmark``)."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "benchmark")
    return Path(root) / "digests"


def _stat_key(path: Path) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def sha256_file(path: Path | str) -> str:
    """sha256 of a file's bytes, unmemoised (used for stage outputs and by ``file_digest``)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()


def file_digest(path: Path | str) -> str:
    """sha256 of a file's content, memoised in this process and on disk by its stat key."""
    path = Path(path)
    key = _stat_key(path)
    if key in _memo:
        return _memo[key]
    entry = cache_dir() / hashlib.sha1(repr(key).encode()).hexdigest()
    try:
        digest = entry.read_text(encoding="ascii").strip()
    except OSError:
        digest = ""
    if len(digest) != 64:
        digest = sha256_file(path)
        if _stat_key(path) == key:  # unchanged while we read it: safe to remember
            try:
                entry.parent.mkdir(parents=True, exist_ok=True)
                with atomic_write(entry) as fh:
                    fh.write(digest)
            except OSError:
                pass  # an unwritable cache only costs time
    _memo[key] = digest
    return digest


def tree_digest(folder: Path | str, names: Iterable[str] | None = None) -> str:
    """One digest over relative paths and contents of the files in ``folder`` (or only ``names``).

    Hidden files (``.git``, ``.cache``, lock files) are skipped; a missing named file counts as
    'missing', so adding it later changes the digest.
    """
    folder = Path(folder)
    rels = tree_files(folder) if names is None else sorted(names)
    return digest_of_tree({rel: file_digest(folder / rel) if (folder / rel).is_file() else None for rel in rels})


def tree_files(folder: Path | str) -> list[str]:
    """The files ``tree_digest`` covers when given no names: every file below ``folder`` but hidden ones."""
    folder = Path(folder)
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def digest_of_tree(files: Mapping[str, str | None]) -> str:
    """``tree_digest``'s value from each file's sha256 (None: missing), e.g. of copies hashed as they were made."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel] or 'missing'}\n".encode())
    return digest.hexdigest()
