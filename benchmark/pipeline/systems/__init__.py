"""The systems a plan composes, one module per family of table rows (see ``base`` for what a system and a
condition are). A new family is one module here with a ``System`` subclass and its instance as ``SYSTEM``."""

from __future__ import annotations

import importlib
import pkgutil

from benchmark.common.registry import Registry
from benchmark.pipeline.systems.base import (
    BASELINE,
    BM25,
    PUBLISHED,
    RUN,
    SPLADE,
    Build,
    Condition,
    RowKey,
    System,
    is_baseline,
)

#: name → system, in the order the plan lists their rows (a ``late`` system's after every other): every
#: module of this package but ``base`` holds one, as ``SYSTEM``, so a new family is one new module
SYSTEMS: Registry[System] = Registry("system", "Each module of benchmark/pipeline/systems/ defines one as SYSTEM")
_found = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__) if m.name != "base"]
for _system in sorted((module.SYSTEM for module in _found), key=lambda s: (s.order, s.name)):
    SYSTEMS.register(_system.name, _system)


def system(name: str) -> System:
    """The registered system of that name (one line naming the valid ones when there is none)."""
    return SYSTEMS[name]


__all__ = [
    "BASELINE",
    "BM25",
    "PUBLISHED",
    "RUN",
    "SPLADE",
    "SYSTEMS",
    "Build",
    "Condition",
    "RowKey",
    "System",
    "is_baseline",
    "system",
]
