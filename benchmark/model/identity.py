"""How a local model folder is named where its path cannot be: by its folder name and content digest.

A hub id or registry key names a model everywhere; a local folder's path names it on one machine only, and
its folder name does not name it at all (two exports of different models may share it). So a local folder
is known by ``<folder name>~<first 8 hex digits of its content digest>`` (the digest its stages' ids carry,
as a local dataset folder is known by ``<folder>~<digest>``), however its path was typed, and a reproduce
command gives it by a path relative to the current folder, or a placeholder where it lies outside.
"""

from __future__ import annotations

import os
from pathlib import Path

DIGEST_CHARS = 8


def local_folder(name: str) -> Path | None:
    """The folder ``name`` names, when it is a local folder (not a registry or synthetic key), else None."""
    from benchmark.model.checkpoints import registered_key
    from benchmark.model.synthetic import SYNTHETIC

    if not name or name in SYNTHETIC or registered_key(name) is not None:
        return None
    path = Path(name).expanduser()
    return path.resolve() if path.is_dir() else None


def model_label(name: str) -> str:
    """A model as tables, files and results folders name it: a local folder as ``<name>~<digest>``, anything
    else as given."""
    from benchmark.common.fingerprint import tree_digest

    folder = local_folder(name)
    if folder is None:
        return name
    try:
        return f"{folder.name}~{tree_digest(folder)[:DIGEST_CHARS]}"
    except OSError:  # unreadable: validation names it in one line before any results folder is written
        return folder.name


def command_path(name: str) -> str:
    """A model as a reproduce command gives it: a local folder inside the current folder by its relative
    path (``exports/x`` however it was typed), one outside it by a placeholder naming its label."""
    folder = local_folder(name)
    if folder is None:
        return name
    here = Path.cwd().resolve()
    if folder == here or here in folder.parents:
        return Path(os.path.relpath(folder, here)).as_posix()
    return f"<folder {model_label(name)}>"


def label_names(label: str) -> set[str]:
    """The names an expected entry may give a labelled model by: the label, and its folder name alone."""
    return {label, label.rsplit("~", 1)[0]} if "~" in label else {label}
