"""No machine paths in a results folder: local datasets get portable names, and any other absolute
path in a recorded text is cut to its last component, so a folder reads the same on every machine."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from benchmark.common.errors import BenchmarkError
from benchmark.data.sources import DatasetRef, parse

# an absolute or home path: not after a word, a URL or a '<' (a closing tag such as '</script>'), and
# ending before quotes, whitespace or markup ('<', '>')
_ABSOLUTE = re.compile(r"(?<![\w:/.$~<-])~?/[^\s'\"/<>]+(?:/[^\s'\"/<>]*)*")


def is_machine_path(name: str) -> bool:
    """An absolute or home-relative path: it names a place on one machine."""
    return name.startswith(("/", "~")) or bool(re.match(r"^[A-Za-z]:[\\/]", name))


def portable_dataset(name: str) -> str:
    """A local BEIR folder given by absolute path becomes ``local:<folder>[@split]``; ids stay."""
    if not is_machine_path(name):
        return name
    folder, at, split = name.partition("@")
    return f"local:{Path(folder).name}" + (f"@{split}" if at else "")


def dataset_labels(names: Iterable[str]) -> dict[str, str]:
    """Portable names that stay unique: local folders that share a folder name (``/a/slice`` and
    ``/b/slice``) each get their content digest, ``local:slice~1a2b3c4d``, so no two datasets share a
    column; one folder given twice keeps one name."""
    refs = {name: _ref(name) for name in dict.fromkeys(names) if is_machine_path(name)}  # each parsed once
    places = {name: ref.place if ref is not None else name for name, ref in refs.items()}  # → what it reads
    shared: dict[str, set[str]] = {}
    for name, where in places.items():
        shared.setdefault(portable_dataset(name), set()).add(where)
    out: dict[str, str] = {}
    for name, ref in refs.items():
        label = portable_dataset(name)
        if len(shared[label]) > 1:
            folder, at, split = label.partition("@")
            digest = ((ref.digest() if ref is not None else None) or name)[:8]
            out[name] = f"{folder}~{digest}" + (f"@{split}" if at else "")
    return out


def _ref(name: str) -> DatasetRef | None:
    try:
        return parse(name)
    except BenchmarkError:  # a name in no known form: validation refuses it before anything is written
        return None


def scrub(text: str, known: Mapping[str, str] = {}) -> str:
    """``text`` without machine paths: known prefixes become their portable names (longest first),
    any other absolute path its last component."""
    for path in sorted(known, key=len, reverse=True):
        text = text.replace(path, known[path])
    return _ABSOLUTE.sub(lambda m: Path(m.group(0)).name or ".", text)
