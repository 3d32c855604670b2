"""Suites are data: one TOML file each in this folder, with expected scores beside the conditions."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchmark.common.config import apply_overrides, bounded, from_dict, load_toml, with_overrides
from benchmark.common.errors import BenchmarkError, unknown
from benchmark.common.registry import Registry

#: Java's int: Lucene takes the ranking depth as one.
MAX_K = 2**31 - 1
#: A suite name is a results folder name: no separators, no ``..``, no ``@`` (subset runs use it).
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")


#: training seeds go to numpy's RandomState (transformers.set_seed), which takes 0 ≤ seed < 2**32
MAX_SEED = 2**32 - 1


def seed_problem(seed: int, where: str) -> str | None:
    """One line when ``seed`` is outside what numpy, torch and random all accept, else None."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        return f"{where} has {seed!r}; a training seed is an integer from 0 to {MAX_SEED} (2**32 - 1), e.g. 42"
    return None


@dataclass(frozen=True)
class Bm25:
    k1: float = bounded(0.9, ge=0, hint="BM25 term-frequency saturation, e.g. 0.9")
    b: float = bounded(0.4, ge=0, le=1, hint="BM25 length normalisation, between 0 and 1")


@dataclass(frozen=True)
class Encode:
    max_doc_length: int = bounded(256, ge=1, hint="tokens per document, e.g. 256")
    max_query_length: int = bounded(64, ge=1, hint="tokens per query, e.g. 64")
    batch_size: int = bounded(32, ge=1, hint="texts per forward pass, e.g. 32")
    shard_size: int = bounded(10000, ge=1, hint="documents per shard, e.g. 10000")
    precision: str = "float32"
    attn_implementation: str = "sdpa"  # pinned: part of the encode stages' ids and records
    compile: str = "none"  # the documents' encoder body: benchmark.retrieval.impact_vectors.COMPILERS


@dataclass(frozen=True)
class RescaleSettings:
    """What the variant ``rescaled`` means in this suite (see benchmark.model.rescale).

    The default is the paper's: the MLM head's weights × 1/k once, k = 16, the same for every backbone.
    ``match`` also names the reference of the extension arms ``head-norm`` and ``match-<statistic>``.
    """

    mode: str = "factor"  # factor | match
    factor: float | None = None  # mode factor: α (default 1/k)
    k: float | None = 16  # mode factor without a factor: α = 1/k (the paper's k)
    match: str | None = "bert-base-uncased"  # mode match: the reference backbone (or a number)
    scale_bias: bool = True
    method: str = "once"  # once (the paper's) | projection | head-norm | tied | untie (benchmark.model.rescale.METHODS)
    match_stat: str = "logit-std"  # frobenius | row-rms | logit-std (benchmark.model.rescale.STATISTICS)

    @property
    def alpha(self) -> float | None:
        """α of mode factor: the factor, else 1/k."""
        if self.factor is not None:
            return self.factor
        return 1.0 / self.k if self.k else None


@dataclass(frozen=True)
class Variant:
    """A named arm beyond baseline/rescaled/x<f>: a head factor and recipe overrides (e.g. λ chosen so
    that FLOPS match the baseline's, separating the head's scale from the density it trains to)."""

    name: str
    factor: float | None = None  # None: the head as pretrained
    overrides: dict[str, Any] = field(default_factory=dict)  # recipe keys for this arm (lambda_q, lambda_d)
    note: str = ""  # why this arm exists, shown in --dry-run
    method: str | None = None  # None: the suite's [splade.rescale] method


@dataclass(frozen=True)
class Splade:
    backbones: list[str]
    variants: list[str] = field(default_factory=lambda: ["baseline"])
    recipe: str | None = None  # None: the untrained backbone only
    untrained: bool = False  # with a recipe, also evaluate the untrained backbone
    sweep: list[float] = field(default_factory=list)  # extra variants x<factor>
    k_grid: list[float] = field(default_factory=list)  # extra variants k<k>: the head × 1/k (the paper's range)
    extra_variants: list[Variant] = field(default_factory=list)
    rescale: RescaleSettings = field(default_factory=RescaleSettings)
    seeds: list[int] = field(default_factory=lambda: [42])  # one training run per seed
    data_seed: int = 42  # negatives mining: shared by every seed, so seeds differ by training only
    # a run sliced on the command line (--max-docs/--max-queries) trains with this recipe, so a CI-sized
    # slice also has CI-sized training; "" keeps the suite's recipe; --recipe always wins
    slice_recipe: str = "ci"


@dataclass(frozen=True)
class Published:
    """SPLADE models trained elsewhere (naver/splade-v3, a SparseEncoder folder), evaluated as they are:
    their rows are "published", never "untrained", and no recipe or rescaling applies to them."""

    models: list[str]  # hub ids, registry keys or local folders (a *ForMaskedLM or SparseEncoder folder)


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
    digits: int = bounded(4, ge=1, hint="decimals shown, e.g. 4")
    alpha: float = 0.05  # significance level of the dagger (after Holm over the table's tests) and of degraded
    # backbone whose baseline arm is the BERT reference of the outcome judgements (benchmark.report.judgements);
    # "": the suite's first backbone named bert…
    reference: str = ""


@dataclass(frozen=True)
class Expected:
    """One 2CR-style regression entry: a score a condition must reproduce on a given subset.

    ``max_docs``/``max_queries`` key the entry to the subset it was measured on (absent: the full
    dataset), so a CI run on a slice and a full run each find their own numbers. ``okish`` is the
    looser band (default 2 × tolerance); ``collapsed = true`` expects the training run to collapse.
    """

    dataset: str
    system: str  # bm25 | splade | published
    measure: str = ""
    value: float | None = None
    tolerance: float = bounded(0.0, ge=0, hint="0 means equal at 4 decimals")
    okish: float | None = None
    backbone: str = ""  # for published: the model as the run names it, or a local folder's name
    variant: str = ""
    trained: bool | None = None  # None: whichever exists (an error if both do)
    max_docs: int | None = bounded(
        None, ge=1, hint="the --max-docs the value was measured with; leave it out for the full corpus"
    )
    max_queries: int | None = bounded(
        None, ge=1, hint="the --max-queries the value was measured with; leave it out for every query"
    )
    collapsed: bool = False
    source: str = ""  # where the number comes from (a paper, 2CR with its address, a measured run)


@dataclass(frozen=True)
class ResourceSpec:
    """A suite's ``[resources.<kind>]`` table: the fields it sets (None: keep the default)."""

    cpus: float | None = None
    gpus: float | None = None
    memory_gb: float | None = None
    workers: int | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    datasets: list[str]
    measures: list[str]  # evaluated on every dataset not in dataset_measures
    bm25: Bm25 | None = None
    splade: Splade | None = None
    published: Published | None = None
    encode: Encode = field(default_factory=Encode)
    k: int = bounded(1000, ge=1, le=MAX_K, hint="the ranking depth per query, e.g. k = 1000")
    max_docs: int | None = bounded(
        None, ge=1, hint="a corpus slice that keeps every judged document; leave it out for the whole corpus"
    )
    max_queries: int | None = bounded(None, ge=1, hint="a query slice; leave it out for every judged query")
    optional_datasets: list[str] = field(default_factory=list)
    # group name → member datasets, reported as one column averaged over its members (CQADupStack)
    groups: dict[str, list[str]] = field(default_factory=dict)
    # dataset or group → its own measures (e.g. RR@10 on MS MARCO dev, R(rel=2)@1000 on TREC DL)
    dataset_measures: dict[str, list[str]] = field(default_factory=dict)
    table: Table = field(default_factory=Table)
    expected: list[Expected] = field(default_factory=list)  # the 2CR-style regression table
    # dataset or group → drop the hit whose id equals the query id (Pyserini's --remove-query);
    # unlisted datasets: on for the ir_datasets BEIR ids (beir/…), as 2CR runs every BEIR dataset;
    # off for local folders, whose equal ids may be coincidences (numeric ids), unless listed here
    remove_query: dict[str, bool] = field(default_factory=dict)
    # stage kind → what one of its tasks asks of a cluster (--executor ray; see benchmark.pipeline.resources)
    resources: dict[str, ResourceSpec] = field(default_factory=dict)
    # impact search engines, each NAME[:POINT] (benchmark.retrieval.engines); every SPLADE row once per engine
    engines: list[str] = field(default_factory=lambda: ["lucene"])

    def removes_query(self, dataset: str) -> bool:
        if dataset in self.remove_query:
            return self.remove_query[dataset]
        for group, members in self.groups.items():
            if dataset in members and group in self.remove_query:
                return self.remove_query[group]
        return dataset.startswith("beir/")

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
        if not PLAIN_NAME.match(self.name):
            out.append(
                f"name = {self.name!r} is not a plain name: it names the results folder <results-dir>/<name>/, so use "
                "letters, digits, '.', '_', '+' or '-' (no '/', '\\', '..', '@' or spaces; at most 100 characters), "
                'e.g. name = "my-suite"'
            )
        if not self.datasets:
            out.append('datasets is empty; list at least one, e.g. datasets = ["beir/scifact/test"]')
        if not self.measures:
            out.append('measures is empty; list at least one ir_measures string, e.g. measures = ["nDCG@10"]')
        for d, ms in self.dataset_measures.items():
            if not ms:
                out.append(f"dataset_measures.{d!r} is empty; list its measures or remove the entry")
        if self.splade is not None or self.published is not None:
            from benchmark.retrieval.lucene import MAX_EXACT_K

            if self.k > MAX_EXACT_K:
                out.append(
                    f"k = {self.k} is above {MAX_EXACT_K}, the deepest impact search whose scores stay the exact "
                    f"integer dot products (Anserini's tie offsets); set k <= {MAX_EXACT_K}, e.g. k = 1000"
                )
        if self.splade is not None:
            if not self.splade.backbones:
                out.append('splade.backbones is empty; list at least one, e.g. backbones = ["bert-tiny"]')
            if not self.splade.seeds:
                out.append("splade.seeds is empty; list at least one training seed, e.g. seeds = [42]")
            out.extend(p for s in self.splade.seeds if (p := seed_problem(s, "splade.seeds")))
            for f in self.splade.sweep:
                if not (math.isfinite(f) and f > 0):
                    out.append(
                        f"splade.sweep has {f!r}; sweep factors are positive finite numbers, e.g. sweep = [0.5, 2.0]"
                    )
            for k in self.splade.k_grid:
                if not (math.isfinite(k) and k > 0):
                    out.append(
                        f"splade.k_grid has {k!r}; k is a positive finite number (α = 1/k), e.g. k_grid = [1, 2, 4, "
                        f"8, 16, 32]"
                    )
            rs = self.splade.rescale
            if rs.k is not None and not (math.isfinite(rs.k) and rs.k > 0):
                out.append(f"splade.rescale.k = {rs.k!r}; k is a positive finite number (α = 1/k), e.g. k = 16")
            if rs.mode == "factor" and rs.factor is None and rs.k is None:
                out.append("splade.rescale: mode 'factor' needs k (α = 1/k, e.g. k = 16) or factor")
            from benchmark.model.rescale import METHODS

            for v in self.splade.extra_variants:
                if v.method is not None and v.method not in METHODS:
                    out.append(f"splade.extra_variants[{v.name!r}].method = {v.method!r}; valid: {', '.join(METHODS)}")
            for v in self.splade.extra_variants:
                if v.factor is not None and not (math.isfinite(v.factor) and v.factor > 0):
                    out.append(
                        f"splade.extra_variants[{v.name!r}].factor = {v.factor!r} must be a positive finite number "
                        "(or left out for the head as pretrained)"
                    )
        if self.published is not None and not self.published.models:
            out.append('published.models is empty; list at least one, e.g. models = ["naver/splade-v3"]')
        known = set(self.known_datasets())
        measures = set(self.all_measures())
        for group, members in self.groups.items():
            if not members:
                out.append(f"groups.{group!r} is empty; list its member datasets")
        for where, name in [
            ("table.measure", self.table.measure),
            *[(f"table.measure_for.{d!r}", m) for d, m in self.table.measure_for.items()],
        ]:
            if name is not None and name not in measures:
                out.append(
                    f"{where} = {name!r} is not one of the suite's measures ({', '.join(self.all_measures())}); add "
                    f"it to measures"
                )
        refs = [(f"table.measure_for.{d!r}", d) for d in self.table.measure_for]
        refs += [(f"dataset_measures.{d!r}", d) for d in self.dataset_measures]
        refs += [(f"table.averages[{a.name!r}]", d) for a in self.table.averages for d in a.datasets]
        refs += [(f"expected[{i}].dataset", e.dataset) for i, e in enumerate(self.expected)]
        refs += [(f"remove_query.{d!r}", d) for d in self.remove_query]  # an unknown key was silently ignored
        for where, d in refs:
            if d not in known:
                out.append(f"{where} names dataset {d!r}, not in the suite; valid: {', '.join(sorted(known))}")
        for i, e in enumerate(self.expected):
            if e.system not in SYSTEMS:
                out.append(f"expected[{i}].system = {e.system!r}; valid: {', '.join(SYSTEMS)}")
            if not e.collapsed and (e.value is None or e.measure not in self.measures_of(e.dataset)):
                out.append(
                    f"expected[{i}] needs measure (one of {', '.join(self.measures_of(e.dataset))}) and value, "
                    "or collapsed = true"
                )
            if e.tolerance < 0 or (e.okish is not None and e.okish < e.tolerance):
                out.append(f"expected[{i}]: need 0 <= tolerance <= okish")
        if self.resources:
            try:
                suite_resources(self.resources)
            except BenchmarkError as exc:
                out.append(str(exc))
        if self.table.digits < 1 or not 0 < self.table.alpha < 1:
            out.append("table.digits must be >= 1 and table.alpha in (0, 1)")
        if self.table.reference and self.splade is not None and self.table.reference not in self.splade.backbones:
            out.append(
                f"table.reference = {self.table.reference!r} is not one of splade.backbones "
                f"({', '.join(self.splade.backbones)}); name the BERT reference's backbone or leave it out"
            )
        from benchmark.model.varlen import NAME as VARLEN
        from benchmark.splade.encoder import PRECISIONS
        from benchmark.training.recipe import ATTN_IMPLEMENTATIONS

        if self.encode.precision not in PRECISIONS:
            out.append(f"encode.precision = {self.encode.precision!r}; valid: {', '.join(PRECISIONS)}")
        attention = (*ATTN_IMPLEMENTATIONS, VARLEN)
        if self.encode.attn_implementation not in attention:
            out.append(
                f"encode.attn_implementation = {self.encode.attn_implementation!r}; valid: "
                f"{', '.join(attention)} ({VARLEN!r}: ModernBERT documents packed without padding)"
            )
        from benchmark.retrieval.impact_vectors import COMPILERS

        if self.encode.compile not in COMPILERS:
            out.append(
                f"encode.compile = {self.encode.compile!r}; valid: {', '.join(COMPILERS)} "
                "('inductor': torch.compile of the documents' encoder body)"
            )
        return out


def resource_value(kind: str, field: str, value: Any, where: str) -> Any:
    """One field of a ``[resources.<kind>]`` table or of ``--resources``, checked (``where`` names it)."""
    if field == "workers":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BenchmarkError(f"{where}: workers = {value!r} must be a whole number ≥ 1, e.g. workers = 2")
        if kind != "train":
            raise BenchmarkError(
                f"{where}: workers applies to train only (data-parallel training); remove it from {kind}"
            )
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise BenchmarkError(f"{where}: {field} = {value!r} must be a number ≥ 0")
    if field == "gpus" and value > 1 and value != int(value):
        raise BenchmarkError(f"{where}: gpus = {value!r}; above 1 it must be a whole number")
    return float(value)


def suite_resources(tables: Mapping[str, ResourceSpec], where: str = "suite") -> dict[str, dict[str, Any]]:
    """A suite's ``[resources]`` as kind → {field: value}, every value checked."""
    from benchmark.stages import KINDS

    kinds = dict(KINDS.items())
    out: dict[str, dict[str, Any]] = {}
    for kind, spec in tables.items():
        if kind not in kinds:
            raise unknown("stage kind", kind, kinds, f"Fix the [resources.{kind}] table of the {where} file")
        fields = {f: v for f, v in dataclasses.asdict(spec).items() if v is not None}
        out[kind] = {f: resource_value(kind, f, v, f"[resources.{kind}]") for f, v in fields.items()}
    return out


#: The systems a ``[[expected]]`` entry may name: this layer sits below ``benchmark.pipeline.systems``,
#: so it keeps the names, and a test holds them equal to the registered systems with ``expected_entries``.
SYSTEMS = ("bm25", "splade", "published")


def suite_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml"))


def packaged_path(name: str) -> Path:
    return Path(str(resources.files(__package__) / f"{name}.toml"))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b) or a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _collision(path: Path, suite: Suite) -> list[str]:
    """A custom file may not take a packaged suite's name: its tables would replace that suite's.

    The packaged file itself (or a byte-identical copy, which gives the same tables) is allowed.
    """
    if suite.name not in suite_names() or _same_file(path, packaged_path(suite.name)):
        return []
    return [
        f"name = {suite.name!r} is the name of a packaged suite, and this file is not that suite: its tables would "
        f'overwrite <results-dir>/{suite.name}/. Give the file its own name (e.g. name = "{suite.name}-custom") '
        f"or run the packaged suite with --suite {suite.name}"
    ]


def canonical_measures(suite: Suite) -> Suite:
    """Every measure string in the suite in ir_measures' canonical spelling (``str(parse_measure(s))``).

    Aggregates, per-query files, tables and expected scores are all keyed by measure strings, so
    ``nDCG(cutoff=10)`` and ``"RR@10 "`` must become ``nDCG@10`` and ``RR@10`` once, here, or their
    values would be computed under one key and looked up under another. Unparsable strings are
    left as written for validation to report.
    """
    from benchmark.evaluation.measures import normalise_measure as norm

    def many(names: list[str]) -> list[str]:
        return list(dict.fromkeys(norm(n) for n in names))

    table = dataclasses.replace(
        suite.table,
        measure=None if suite.table.measure is None else norm(suite.table.measure),
        measure_for={d: norm(m) for d, m in suite.table.measure_for.items()},
    )
    expected = [dataclasses.replace(e, measure=norm(e.measure)) if e.measure else e for e in suite.expected]
    return dataclasses.replace(
        suite,
        measures=many(suite.measures),
        table=table,
        expected=expected,
        dataset_measures={d: many(ms) for d, ms in suite.dataset_measures.items()},
    )


#: ``[encode] profile = NAME``: shared encode settings, one TOML file each in ``benchmark/suites/encode_profiles/``
ENCODE_PROFILES: Registry[Path] = Registry(
    "encode profile", fix="Set [encode] profile to one of these, or leave it out"
)
for _path in sorted(Path(str(resources.files("benchmark.suites.encode_profiles"))).glob("*.toml")):
    ENCODE_PROFILES.register(_path.stem, _path)


def with_encode_profile(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` with ``[encode] profile`` replaced by the profile's settings; keys the suite sets beside it win.

    The profile is resolved here, before the suite is built, so an encode stage's config (and id) is
    the same whether its settings come from a profile or are written out in the suite.
    """
    encode = data.get("encode")
    if not isinstance(encode, dict) or "profile" not in encode:
        return data
    own = dict(encode)
    name = own.pop("profile")
    if not isinstance(name, str):
        raise BenchmarkError(
            f"{where}.encode.profile must be a profile name, got {name!r}; valid: {', '.join(ENCODE_PROFILES)}"
        )
    path = ENCODE_PROFILES[name]
    profile = load_toml(path)
    from_dict(Encode, profile, f"encode profile {path.name}")  # its own keys and ranges, named by its file
    return {**data, "encode": {**profile, **own}}


def load_suite(name: str, overrides: Sequence[tuple[list[str], Any]] = ()) -> Suite:
    """A packaged suite by name, or a suite TOML file by path; ``overrides`` (``--set key=value``, as
    parsed by ``benchmark.common.config.parse_override``) change its values before they are checked."""
    path = Path(name)
    custom = path.suffix == ".toml" and path.is_file()
    if not custom:
        if name not in suite_names():
            raise unknown(
                "suite",
                name,
                suite_names(),
                "Pass one of these to --suite, or a path to a suite .toml file "
                "(or leave --suite out to run any ir_datasets id given to --datasets)",
            )
        path = packaged_path(name)
    try:
        return suite_from_data(
            apply_overrides(load_toml(path), list(overrides), "suite"),
            path,
            custom,
            measures_overridden=any(p[0] in MEASURE_KEYS for p, _ in overrides),
        )
    except BenchmarkError as exc:
        raise with_overrides(exc, list(overrides)) from None


#: the keys that choose what is evaluated: set from the command line, they narrow the suite's [[expected]] table
MEASURE_KEYS = ("measures", "dataset_measures")


def suite_from_data(data: dict[str, Any], path: Path, custom: bool = True, measures_overridden: bool = False) -> Suite:
    """A suite from its TOML document, checked (``path`` names it in messages). With ``measures_overridden``
    (``--set measures=[…]``), the expected scores of measures no longer evaluated are dropped: the suite's own
    entries, which the command never named, are not what is wrong with it."""
    data = with_encode_profile(data, path.name)
    suite = canonical_measures(from_dict(Suite, data, str(path.name)))
    if measures_overridden:
        suite = dataclasses.replace(
            suite, expected=[e for e in suite.expected if e.collapsed or e.measure in suite.measures_of(e.dataset)]
        )
    if suite.bm25 is None and suite.splade is None and suite.published is None:
        raise BenchmarkError(f"suite file {path.name} defines no system; add a [bm25], [splade] or [published] table")
    problems = suite.problems() + (_collision(path, suite) if custom else [])
    if problems:
        raise BenchmarkError(f"suite file {path.name}: " + " | ".join(problems))
    return suite
