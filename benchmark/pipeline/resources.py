"""What one task of each stage kind asks of a cluster: CPUs, GPUs, memory, and for training the number
of data-parallel workers. The Ray executor schedules by these; the local executor ignores them.

Defaults follow each kind's ``device``: a "gpu" kind (train, encode, queries) asks for 1 GPU and 1
CPU, a "cpu" kind (corpus, index, search, evaluate, …) for 1 CPU. A suite may change them in its
``[resources.<kind>]`` tables and the command line in ``--resources``; later wins, field by field::

    [resources.index]
    cpus = 4
    memory_gb = 16

    --resources encode=gpu:1,index=cpu:8+mem:32,train=gpu:1+workers:4

A CPU stage runs Lucene with as many threads as it has CPUs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.common.errors import BenchmarkError, unknown
from benchmark.suites import resource_value


@dataclass(frozen=True)
class Resources:
    """One task's share of a node (for training: one worker's share, times ``workers``)."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_gb: float = 0.0  # 0: not reserved
    workers: int = 1  # train only: data-parallel workers (Ray Train), each with the resources above

    @property
    def threads(self) -> int:
        """Threads for the task's compute (Lucene, torch on CPU): its whole CPUs, at least one."""
        return max(1, int(self.cpus))

    def describe(self) -> str:
        parts = [f"{self.gpus:g} GPU"] if self.gpus else []
        parts.append(f"{self.cpus:g} CPU")
        if self.memory_gb:
            parts.append(f"{self.memory_gb:g} GiB")
        text = " + ".join(parts)
        return f"{self.workers} workers × ({text})" if self.workers > 1 else text


#: ``--resources`` names → Resources fields
CLI_NAMES = {"cpu": "cpus", "gpu": "gpus", "mem": "memory_gb", "workers": "workers"}


def default(kind: Any) -> Resources:
    return Resources(cpus=1.0, gpus=1.0) if getattr(kind, "device", "cpu") == "gpu" else Resources(cpus=1.0)


def _kinds() -> dict[str, Any]:
    from benchmark.stages import KINDS

    return dict(KINDS.items())


def parse_cli(value: str | None) -> dict[str, dict[str, Any]]:
    """``encode=gpu:1,index=cpu:2+mem:8`` → {"encode": {"gpus": 1.0}, "index": {"cpus": 2.0, "memory_gb": 8.0}}."""
    if not value:
        return {}
    kinds = _kinds()
    fix = "Pass --resources KIND=NAME:N[+NAME:N],… e.g. --resources encode=gpu:1,index=cpu:2+mem:8"
    out: dict[str, dict[str, Any]] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        kind, eq, spec = item.partition("=")
        kind = kind.strip()
        if not eq or not spec.strip():
            raise BenchmarkError(f"--resources item {item!r} has no KIND=…; {fix}")
        if kind not in kinds:
            raise unknown("stage kind", kind, kinds, fix)
        for part in spec.split("+"):
            name, colon, number = part.strip().partition(":")
            if name not in CLI_NAMES:
                raise unknown(f"resource in --resources {item!r}", name, CLI_NAMES, fix)
            field = CLI_NAMES[name]
            try:
                parsed: Any = int(number) if field == "workers" else float(number)
            except ValueError:
                raise BenchmarkError(f"--resources {item!r}: {name}:{number!r} is not a number; {fix}") from None
            out.setdefault(kind, {})[field] = resource_value(kind, field, parsed, f"--resources {item!r}")
    return out


def resolve(kinds: Iterable[Any], *layers: Mapping[str, Mapping[str, Any]]) -> dict[str, Resources]:
    """Kind name → its Resources: the default, then each layer (suite, command line) field by field."""
    out = {}
    for kind in kinds:
        fields = dataclasses.asdict(default(kind))
        for layer in layers:
            fields.update(layer.get(kind.name, {}))
        out[kind.name] = Resources(**fields)
    return out
