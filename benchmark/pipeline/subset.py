"""A run the command line narrowed: its label (tables and pages show it) and the results folder it names."""

from __future__ import annotations

from collections.abc import Sequence

from benchmark.common.errors import BenchmarkError
from benchmark.data.sources import parse


def narrowing_label(narrowing: Sequence[tuple[str, str]]) -> str | None:
    """What the command line narrowed (its ``Options.narrowing()``), in full (None: the whole suite); tables
    and pages show it."""
    parts = []
    for flag, value in narrowing:
        if flag == "datasets":
            value = "+".join(_short_dataset(d) for d in value.split(","))
        elif flag in ("backbones", "published", "recipe"):
            value = ",".join(_short_model(m) for m in value.split(","))
        parts.append(f"{flag}={value}")
    return ",".join(parts) or None


def _short_model(name: str) -> str:
    """A model or recipe as a label names it: a local model folder by its name and content digest
    (benchmark.model.identity), a recipe file by its own name (the label names the results folder, which
    holds no machine path); keys and hub ids as given."""
    from pathlib import Path

    from benchmark.model.identity import local_folder, model_label

    if local_folder(name) is not None:
        return model_label(name)
    if name.startswith(("/", "~", ".")):
        return Path(name.rstrip("/\\")).name or name
    return name


def subset_folder(label: str) -> str:
    """A filesystem-safe folder name for a subset label: long labels keep a prefix and a digest."""
    import hashlib
    import re

    name = re.sub(r"[^A-Za-z0-9=+,.:_~-]", "_", label)
    if len(name) > 80:
        name = name[:60] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


def _short_dataset(name: str) -> str:
    """A dataset in a subset label (and so in its results folder's name). A local folder carries its content
    digest, ``cisi~1a2b3c4d``: two folders of one name, run apart, must not publish into one results folder,
    the second's numbers under the first's name."""
    try:
        return parse(name).short()
    except BenchmarkError:  # a name in no known form: validation names it before any results folder is written
        return name
