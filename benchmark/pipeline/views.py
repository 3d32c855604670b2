"""What a consumer reads of a plan: the planner's ``Plan`` is one, and so is the plan a report refresh
rebuilds from a results record (``benchmark.report.collect.RecordedPlan``); mypy checks both against these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from benchmark.stages.store import StageView


class SuiteView(Protocol):
    """What a report reads of a suite: its name, its description, its ``[table]`` settings (a
    ``benchmark.suites.Table``, or the same as a dict when read back from results.json) and its expected
    scores."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def table(self) -> object: ...

    @property
    def expected(self) -> Sequence[object] | None: ...  # the [[expected]] entries (None: not recorded)


class ConditionView(Protocol):
    """What a report reads of one condition (a cell of the tables for one seed) and the stages behind it."""

    @property
    def dataset(self) -> str: ...

    @property
    def system(self) -> str: ...

    @property
    def backbone(self) -> str: ...

    @property
    def variant(self) -> str: ...

    @property
    def factor(self) -> str: ...

    @property
    def method(self) -> str: ...

    @property
    def trained(self) -> bool: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def evaluate(self) -> StageView | None: ...

    @property
    def train(self) -> StageView | None: ...

    @property
    def search(self) -> StageView | None: ...

    @property
    def command(self) -> str: ...


class PlanView(Protocol):
    """What ``benchmark.report.collect`` reads of a plan: the planner's ``Plan`` is one, and so is the plan a
    refresh rebuilds from a results record and its stage ids (``benchmark.report.collect.RecordedPlan``)."""

    @property
    def suite(self) -> SuiteView: ...

    @property
    def measures(self) -> Sequence[str]: ...

    @property
    def dataset_measures(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def columns(self) -> Sequence[str]: ...

    @property
    def groups(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def max_docs(self) -> int | None: ...

    @property
    def max_queries(self) -> int | None: ...

    @property
    def seeds(self) -> Sequence[int]: ...

    @property
    def subset(self) -> str | None: ...

    @property
    def training(self) -> str: ...

    @property
    def conditions(self) -> Sequence[ConditionView]: ...
