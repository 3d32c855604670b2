"""What a system is, and the row and cell it makes: a system is a family of table rows that turn a dataset
into a ranked list by one recipe (BM25; SPLADE trained here; a SPLADE model trained elsewhere; a run file);
a condition is one system on one dataset for one seed, a cell of the tables.

A system declares its stages (``conditions``), its row's label and TREC run tag, which of the report's
comparisons and columns apply to it, and how a suite's ``[[expected]]`` entries name it. The plan composes
the registered systems; the report asks them instead of matching names."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from benchmark.stages import Encode, Evaluate, Index, Queries, Search
from benchmark.stages.store import Stage

BM25 = "bm25"
SPLADE = "splade"
PUBLISHED = "published"  # a model trained elsewhere, evaluated as it is: backbone = its name, never "untrained"
RUN = "run"  # a --run file's rows: variant = its name
BASELINE = "baseline"  # the unrescaled SPLADE variant every other variant's Δ is taken against


class RowKey(NamedTuple):
    """What identifies a row of the result tables: the same system on every dataset and seed."""

    system: str
    backbone: str = ""
    variant: str = ""
    trained: bool = False


def is_baseline(variant: str) -> bool:
    """``baseline``, or a shared label that includes it (``baseline = x1``)."""
    return BASELINE in (part.strip() for part in variant.split("="))


def tag_text(text: str) -> str:
    """A TREC run tag: no spaces, nothing outside word characters and ``.=+:@-``."""
    return re.sub(r"[^\w.=+:@-]", "_", text)


@dataclass(frozen=True)
class Condition:
    """One cell of the result tables for one seed: a system on a dataset."""

    dataset: str
    system: str  # a registered system's name: bm25 | splade | published | run
    backbone: str = ""
    variant: str = ""  # the row label; variants that share one model are joined: "baseline = x1"
    variants: tuple[str, ...] = ()  # the variant names behind the label
    factor: str = ""
    method: str = ""  # how the head was rescaled ("" when it was not)
    trained: bool = False
    seed: int | None = None
    evaluate: Stage | None = None
    train: Stage | None = None
    search: Stage | None = None
    backbone_stage: Stage | None = None
    command: str = ""  # the command that reproduces this row
    engine: str = ""  # the impact search's engine label where it is not Lucene ("pisa:maxscore")

    @property
    def system_key(self) -> RowKey:
        """What identifies a row of the result tables: the same system on every dataset and seed."""
        return RowKey(self.system, self.backbone, self.variant, self.trained)

    @property
    def is_baseline(self) -> bool:
        return self.system == SPLADE and BASELINE in self.variants

    @property
    def arm(self) -> str:
        """The row label with how its head was rescaled: 'rescaled [projection ×0.0625 = 1/16]'."""
        from benchmark.model.rescale import rescale_tag

        return f"{self.variant} [{rescale_tag(self.method, self.factor)}]" if self.method else self.variant

    def row(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "system": self.system,
            "backbone": self.backbone,
            "variant": self.variant,
            "variants": list(self.variants),
            "factor": self.factor,
            "method": self.method,
            "trained": self.trained,
            "seed": self.seed,
            "command": self.command,
        } | ({"engine": self.engine} if self.engine else {})


@dataclass
class Build:
    """What a system's ``conditions`` is given by the plan: the suite and command line, the datasets, and the
    shared parts every system builds on, so that two systems asking for one stage get one stage.

    ``impact_search`` is the one place a model's encodings become a search: a choice of search engine is a
    parameter there (one of ``engines``, the run's choices), shared by every system that searches impacts,
    not a copy of those systems."""

    suite: Any  # benchmark.suites.Suite
    opts: Any  # benchmark.pipeline.plan.Options
    plan: Any  # benchmark.pipeline.plan.Plan, for the matrix a system records (backbones, variants, seeds)
    datasets: list[str]
    problems: list[str]
    data_stages: Callable[[str, int | None, int | None], tuple[Stage, Stage]]  # (topics, corpus) of a cut
    command: Callable[..., str]  # the command that reproduces a row, given its narrowing flags
    max_docs: int | None = None
    max_queries: int | None = None
    #: the impact search engines of this run (``benchmark.retrieval.engines`` choices; Lucene alone by default):
    #: a system that searches impacts makes each of its rows once per choice
    engines: Sequence[Any] = (None,)

    def data(self, name: str) -> tuple[Stage, Stage]:
        """(topics, corpus) of an evaluated dataset, cut as this run cuts them."""
        return self.data_stages(name, self.max_docs, self.max_queries)

    def evaluate(self, ranked: Stage, name: str) -> Stage:
        """The evaluate stage of a ranked list (a search, a run file) on ``name``."""
        topics, corpus = self.data(name)
        config = Evaluate.Config(tuple(sorted(self.suite.measures_of(name))))
        return Stage(Evaluate, config, {"run": ranked, "topics": topics, "corpus": corpus})

    def impact_search(
        self, model: Stage, name: str, limit: int | None = None, choice: Any = None
    ) -> tuple[Stage, Stage]:
        """(evaluate, search) of a model's encodings of ``name``, searched in an impact index of ``choice``'s
        engine (one of ``engines``; Lucene when None); ``limit``: the model's own max_seq_length, which caps
        the suite's lengths (a smaller suite setting stands)."""
        suite, e = self.suite, self.suite.encode
        topics, corpus = self.data(name)
        doc_cfg = Encode.Config(
            e.max_doc_length, e.batch_size, e.shard_size, e.precision, e.attn_implementation, e.compile
        )
        query_cfg = Queries.Config(e.max_query_length, e.batch_size, e.precision, e.attn_implementation)
        if limit is not None:
            doc_cfg = dataclasses.replace(doc_cfg, max_length=min(doc_cfg.max_length, limit))
            query_cfg = dataclasses.replace(query_cfg, max_length=min(query_cfg.max_length, limit))
        encode = Stage(Encode, doc_cfg, {"model": model, "corpus": corpus})
        queries = Stage(Queries, query_cfg, {"model": model, "topics": topics})
        engine, spec = (choice.engine.name, choice.spec) if choice is not None else ("lucene", "lucene")
        revision = choice.engine.revision if choice is not None else 0
        idx = Stage(Index, Index.Config("impact", engine=engine, engine_revision=revision), {"source": encode})
        search = Stage(
            Search,
            Search.Config(suite.k, remove_query=suite.removes_query(name), exact=True, engine=spec),
            {"index": idx, "queries": queries, "docs": encode},
        )
        return self.evaluate(search, name), search

    def engine_flag(self, choice: Any) -> str | None:
        """A row command's ``--engines``: the row's own engine where the run searched with another than Lucene
        alone."""
        if choice is None:
            return None
        return choice.name if len(self.engines) > 1 or choice.engine.name != "lucene" else None


def engine_name(choice: Any) -> str:
    """A condition's ``engine``: the choice's name where it is not Lucene, else empty."""
    return "" if choice is None or choice.engine.name == "lucene" else choice.name


def engine_label(label: str, choice: Any) -> str:
    """A row's label with its engine where it is not Lucene: ``baseline · pisa:maxscore``, and ``(approximate)``
    for an approximate point."""
    if choice is None or choice.engine.name == "lucene":
        return label
    return f"{label} · {choice.label}" if label else choice.label


class System:
    """A family of table rows. Subclasses set ``name`` and override what differs; one instance of each is
    registered in ``benchmark.pipeline.systems.SYSTEMS`` from its module's ``SYSTEM``."""

    name: ClassVar[str] = ""
    #: where its rows stand among the systems' (bm25 10, runfile 20, published 30, splade 40)
    order: ClassVar[int] = 100
    #: built before the systems registered after it but listed after them (rows trained elsewhere follow
    #: the harness's own)
    late: ClassVar[bool] = False
    #: its rows have a Δ against a baseline row of the same system (same backbone and training, unrescaled)
    has_baseline: ClassVar[bool] = False
    #: its rows are tested against the BM25 row (same queries)
    against_bm25: ClassVar[bool] = True
    #: its ranked list comes from a search this run times (a run file's stage reads a file: no ms per query)
    searches: ClassVar[bool] = True
    #: its rows show what training did (outcome, dense judgements, the scale plots): rows trained here
    trains: ClassVar[bool] = False
    #: a suite's ``[[expected]]`` entries may name it (``benchmark.suites.SYSTEMS`` keeps these names)
    expected_entries: ClassVar[bool] = True

    def conditions(self, build: Build) -> list[Condition]:
        """Its conditions (and through them its stages) for the plan."""
        return []

    def present(self, suite: Any, opts: Any) -> bool:
        """Whether a run of ``suite`` with the command line's ``opts`` has rows of it (``--systems`` refuses
        a family that has none)."""
        return True

    #: what to add to the command line for rows of it when ``present`` says there are none ("" for none)
    how_to_add: ClassVar[str] = ""

    def label(self, key: RowKey) -> str:
        """The row's name in every table and page."""
        raise NotImplementedError

    def state(self, key: RowKey) -> str:
        """The last part of a row's id: trained or untrained."""
        return "trained" if key.trained else "untrained"

    def tag(self, c: Any) -> str:
        """A TREC run tag naming the row, distinct per row (``c``: a ``ConditionResult``)."""
        return tag_text(re.sub(r"\s+", "", c.system)) or "run"

    def untrained_cell(self, c: Any) -> str:
        """The outcome column of a row trained by nobody."""
        return ""

    def dry_run(self, c: Condition) -> str:
        """The condition in ``--dry-run``'s list."""
        return c.system

    # ``[[expected]]`` entries (``benchmark.suites.Expected``): which conditions they name

    def matches(self, entry: Any, cond: Any) -> bool:
        """Whether ``entry`` names ``cond`` (``cond.system`` is already this system)."""
        return True

    def describe(self, entry: Any) -> str:
        """The entry as ``--check`` prints it."""
        return self.name

    def evaluates(self, entry: Any, models: Iterable[str]) -> bool:
        """Whether a run evaluating ``models`` (published models by name) measures ``entry``."""
        return True
