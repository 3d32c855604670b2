"""Suites are data: one TOML file each in this folder, with expected scores beside the conditions."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchmark.config import from_dict, load_toml
from benchmark.errors import BenchmarkError, unknown
from benchmark.resources import ResourceSpec


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
    precision: str = "float32"
    attn_implementation: str = "sdpa"  # pinned: part of the encode stages' ids and records


@dataclass(frozen=True)
class RescaleSettings:
    """What the variant ``rescaled`` means in this suite (see benchmark.rescale)."""

    mode: str = "match"
    factor: float | None = None
    match: str | None = "bert-base-uncased"
    scale_bias: bool = True


@dataclass(frozen=True)
class Variant:
    """A named arm beyond baseline/rescaled/x<f>: a head factor and recipe overrides (e.g. λ chosen so
    that FLOPS match the baseline's, separating the head's scale from the density it trains to)."""

    name: str
    factor: float | None = None  # None: the head as pretrained
    overrides: dict[str, Any] = field(default_factory=dict)  # recipe keys for this arm (lambda_q, lambda_d)
    note: str = ""  # why this arm exists, shown in --dry-run


@dataclass(frozen=True)
class Splade:
    backbones: list[str]
    variants: list[str] = field(default_factory=lambda: ["baseline"])
    recipe: str | None = None  # None: the untrained backbone only
    untrained: bool = False  # with a recipe, also evaluate the untrained backbone
    sweep: list[float] = field(default_factory=list)  # extra variants x<factor>
    extra_variants: list[Variant] = field(default_factory=list)
    rescale: RescaleSettings = field(default_factory=RescaleSettings)
    seeds: list[int] = field(default_factory=lambda: [42])  # one training run per seed
    data_seed: int = 42  # negatives mining: shared by every seed, so seeds differ by training only


@dataclass(frozen=True)
class Average:
    """A column of the paper-style table: the mean of each listed dataset's headline measure."""

    name: str
    datasets: list[str]


@dataclass(frozen=True)
class Table:
    """How ``results/<suite>/table.*`` look: the headline measure per dataset, the averages, the digits."""

    measure: str | None = None  # headline measure; default: the suite's first measure
    measure_for: dict[str, str] = field(default_factory=dict)  # dataset or group → its headline measure
    averages: list[Average] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # dataset or group → column header
    digits: int = 4
    alpha: float = 0.05  # significance level of the dagger, after Holm over the table's datasets


@dataclass(frozen=True)
class Expected:
    """One 2CR-style regression entry: a score a condition must reproduce on a given subset.

    ``max_docs``/``max_queries`` key the entry to the subset it was measured on (absent: the full
    dataset), so a CI run on a slice and a full run each find their own numbers. ``okish`` is the
    looser band (default 2 × tolerance); ``collapsed = true`` expects the training run to collapse.
    """

    dataset: str
    system: str  # bm25 | splade
    measure: str = ""
    value: float | None = None
    tolerance: float = 0.0
    okish: float | None = None
    backbone: str = ""
    variant: str = ""
    trained: bool | None = None  # None: whichever exists (an error if both do)
    max_docs: int | None = None
    max_queries: int | None = None
    collapsed: bool = False
    source: str = ""  # where the number comes from (a paper, 2CR, a measured run)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    datasets: list[str]
    measures: list[str]  # evaluated on every dataset not in dataset_measures
    bm25: Bm25 | None = None
    splade: Splade | None = None
    encode: Encode = field(default_factory=Encode)
    k: int = 1000
    max_docs: int | None = None
    max_queries: int | None = None
    optional_datasets: list[str] = field(default_factory=list)
    # group name → member datasets, reported as one column averaged over its members (CQADupStack)
    groups: dict[str, list[str]] = field(default_factory=dict)
    # dataset or group → its own measures (e.g. RR@10 on MS MARCO dev, R(rel=2)@1000 on TREC DL)
    dataset_measures: dict[str, list[str]] = field(default_factory=dict)
    table: Table = field(default_factory=Table)
    expected: list[Expected] = field(default_factory=list)  # the 2CR-style regression table
    # dataset or group → drop the hit whose id equals the query id (Pyserini's --remove-query);
    # unlisted datasets: on for BEIR (ids beir/… and local BEIR folders), as 2CR scores BEIR
    remove_query: dict[str, bool] = field(default_factory=dict)
    # stage kind → what one of its tasks asks of a cluster (--executor ray; see benchmark.resources)
    resources: dict[str, ResourceSpec] = field(default_factory=dict)

    def removes_query(self, dataset: str) -> bool:
        if dataset in self.remove_query:
            return self.remove_query[dataset]
        for group, members in self.groups.items():
            if dataset in members and group in self.remove_query:
                return self.remove_query[group]
        from benchmark.data import DatasetRef

        return dataset.startswith("beir/") or DatasetRef(dataset).local is not None

    def known_datasets(self) -> list[str]:
        """Every name --datasets accepts: the datasets, the optional ones, the groups and their members."""
        names = list(self.datasets) + list(self.optional_datasets)
        for group, members in self.groups.items():
            names += [group, *members]
        return list(dict.fromkeys(names))

    def measures_of(self, dataset: str) -> list[str]:
        """The measures evaluated on ``dataset`` (its own, its group's, or the suite's)."""
        if dataset in self.dataset_measures:
            return list(self.dataset_measures[dataset])
        for group, members in self.groups.items():
            if dataset in members and group in self.dataset_measures:
                return list(self.dataset_measures[group])
        return list(self.measures)

    def all_measures(self) -> list[str]:
        return list(dict.fromkeys([*self.measures, *(m for ms in self.dataset_measures.values() for m in ms)]))

    def problems(self) -> list[str]:
        """Cross-references that types alone cannot check, every one at once."""
        out: list[str] = []
        known = set(self.known_datasets())
        measures = set(self.all_measures())
        for group, members in self.groups.items():
            if not members:
                out.append(f"groups.{group!r} is empty; list its member datasets")
        for where, name in [("table.measure", self.table.measure), *[(f"table.measure_for.{d!r}", m) for d, m in self.table.measure_for.items()]]:
            if name is not None and name not in measures:
                out.append(f"{where} = {name!r} is not one of the suite's measures ({', '.join(self.all_measures())}); add it to measures")
        refs = [(f"table.measure_for.{d!r}", d) for d in self.table.measure_for]
        refs += [(f"dataset_measures.{d!r}", d) for d in self.dataset_measures]
        refs += [(f"table.averages[{a.name!r}]", d) for a in self.table.averages for d in a.datasets]
        refs += [(f"expected[{i}].dataset", e.dataset) for i, e in enumerate(self.expected)]
        for where, d in refs:
            if d not in known:
                out.append(f"{where} names dataset {d!r}, not in the suite; valid: {', '.join(sorted(known))}")
        for i, e in enumerate(self.expected):
            if e.system not in SYSTEMS:
                out.append(f"expected[{i}].system = {e.system!r}; valid: {', '.join(SYSTEMS)}")
            if not e.collapsed and (e.value is None or e.measure not in self.measures_of(e.dataset)):
                out.append(f"expected[{i}] needs measure (one of {', '.join(self.measures_of(e.dataset))}) and value, "
                           "or collapsed = true")
            if e.tolerance < 0 or (e.okish is not None and e.okish < e.tolerance):
                out.append(f"expected[{i}]: need 0 <= tolerance <= okish")
        if self.resources:
            from benchmark.resources import from_suite

            try:
                from_suite(self.resources)
            except BenchmarkError as exc:
                out.append(str(exc))
        if self.table.digits < 1 or not 0 < self.table.alpha < 1:
            out.append("table.digits must be >= 1 and table.alpha in (0, 1)")
        return out


SYSTEMS = ("bm25", "splade")


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
    problems = suite.problems()
    if problems:
        raise BenchmarkError(f"suite file {path.name}: " + " | ".join(problems))
    return suite
