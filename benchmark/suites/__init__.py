"""Suites are data: one TOML file each in this folder, with expected scores beside the conditions."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from benchmark.config import from_dict, load_toml
from benchmark.errors import BenchmarkError, unknown


@dataclass(frozen=True)
class Bm25:
    k1: float = 0.9
    b: float = 0.4


@dataclass(frozen=True)
class Encode:
    max_doc_length: int = 256
    max_query_length: int = 64
    batch_size: int = 32
    shard_size: int = 10000
    scale: int = 100  # quantisation: impact = round(w · scale)
    precision: str = "float32"


@dataclass(frozen=True)
class RescaleSettings:
    """What the variant ``rescaled`` means in this suite (see benchmark.rescale)."""

    mode: str = "match"
    factor: float | None = None
    match: str | None = "bert-base-uncased"
    scale_bias: bool = True


@dataclass(frozen=True)
class Splade:
    backbones: list[str]
    variants: list[str] = field(default_factory=lambda: ["baseline"])
    recipe: str | None = None  # None: the untrained backbone only
    untrained: bool = False  # with a recipe, also evaluate the untrained backbone
    sweep: list[float] = field(default_factory=list)  # extra variants x<factor>
    rescale: RescaleSettings = field(default_factory=RescaleSettings)
    seed: int = 42


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    datasets: list[str]
    measures: list[str]
    bm25: Bm25 | None = None
    splade: Splade | None = None
    encode: Encode = field(default_factory=Encode)
    k: int = 1000
    max_docs: int | None = None
    max_queries: int | None = None
    optional_datasets: list[str] = field(default_factory=list)
    # dataset → system → measure → [expected, tolerance]; the 2CR-style regression table
    expected: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)


def suite_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml"))


def load_suite(name: str) -> Suite:
    """A packaged suite by name, or a suite TOML file by path."""
    path = Path(name)
    if not (path.suffix == ".toml" and path.is_file()):
        if name not in suite_names():
            raise unknown("suite", name, suite_names(), "Pass one of these to --suite, or a path to a suite .toml file")
        path = Path(str(resources.files(__package__) / f"{name}.toml"))
    data = load_toml(path)
    suite = from_dict(Suite, data, str(path.name))
    if suite.bm25 is None and suite.splade is None:
        raise BenchmarkError(f"suite file {path.name} defines no system; add a [bm25] or [splade] table")
    return suite
