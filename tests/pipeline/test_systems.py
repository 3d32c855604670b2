"""Systems as registered plug-ins: the registry, each family's label, row id and run tag, and a new system
plugged into the plan and the report's labels without touching either."""

from __future__ import annotations

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.plan import Options, build_plan
from benchmark.pipeline.systems import SYSTEMS, Build, Condition, RowKey, System, system
from benchmark.pipeline.systems.bm25 import Bm25System
from benchmark.report.labels import baseline_of, bm25_of, row_id, system_label
from benchmark.report.results import ConditionResult, run_tag
from benchmark.suites import load_suite


def test_the_families_are_registered_in_row_order_and_a_second_of_a_name_is_refused():
    assert list(SYSTEMS) == ["bm25", "run", "published", "splade"]
    with pytest.raises(ValueError, match="system 'bm25' is already registered"):
        SYSTEMS.register("bm25", Bm25System())
    with pytest.raises(BenchmarkError) as err:
        system("rerank")
    assert str(err.value) == (
        "unknown system 'rerank'; valid: bm25, published, run, splade. Each module of benchmark/pipeline/systems/ "
        "defines one as SYSTEM"
    )


def test_the_command_line_and_the_suite_files_name_the_registered_systems():
    """``--systems`` offers every registered family; a suite's ``[[expected]]`` entries, checked in a layer
    below the registry, name exactly the families that take them (a run file is the user's own)."""
    from benchmark import suites
    from benchmark.pipeline import commands

    assert commands.SYSTEMS == tuple(SYSTEMS)
    assert (
        set(suites.SYSTEMS)
        == {name for name, s in SYSTEMS.items() if s.expected_entries}
        == {
            "bm25",
            "published",
            "splade",
        }
    )


@pytest.mark.parametrize(
    ("key", "label", "state"),
    [
        (RowKey("bm25"), "BM25", "untrained"),
        (RowKey("run", "", "mine"), "mine (run file)", "untrained"),
        (RowKey("published", "naver/splade-v3"), "SPLADE naver/splade-v3 (published)", "published"),
        (RowKey("splade", "bert-tiny", "x4", True), "SPLADE bert-tiny x4", "trained"),
        (RowKey("splade", "bert-tiny", "baseline"), "SPLADE bert-tiny baseline (untrained)", "untrained"),
    ],
)
def test_each_family_names_its_rows(key, label, state):
    assert system_label(*key) == label
    assert row_id(key) == f"{key.system}|{key.backbone}|{key.variant}|{state}"
    assert row_id(tuple(key)) == row_id(key)  # a plain tuple (results read back) is the same row


def test_each_family_tags_its_runs():
    def tag(**fields):
        return run_tag(ConditionResult(key="k", dataset="d", **fields))

    assert tag(system="bm25") == "bm25"
    assert tag(system="run", variant="my run") == "run.my_run"
    assert tag(system="published", backbone="naver/splade-v3") == "published.naver_splade-v3"
    assert (
        tag(system="splade", backbone="bert-tiny", variant="x4", method="head-norm", factor="4", trained=True, seed=44)
        == "splade.bert-tiny.x4.head-norm-4.seed44"
    )
    assert (
        tag(system="splade", backbone="bert-tiny", variant="baseline = x1") == "splade.bert-tiny.baseline=x1.untrained"
    )


def test_the_comparisons_a_row_gets_are_its_systems():
    bm25, base = RowKey("bm25"), RowKey("splade", "b", "baseline = x1", True)
    x4, published = RowKey("splade", "b", "x4", True), RowKey("published", "m")
    rows = {k: None for k in (bm25, base, x4, published)}
    assert baseline_of(x4, rows) == base and baseline_of(base, rows) is None and baseline_of(published, rows) is None
    assert bm25_of(x4, rows) == bm25 and bm25_of(published, rows) == bm25 and bm25_of(bm25, rows) is None


class Echo(System):
    """A system as a contributor adds one: BM25's ranking under another row (a reranker's first stage)."""

    name = "echo"
    order = 50

    def conditions(self, build: Build) -> list[Condition]:
        out = []
        for name in build.datasets:
            search = Bm25System.search(build, name)
            out.append(Condition(name, self.name, "first", evaluate=build.evaluate(search, name), search=search))
        return out

    def label(self, key: RowKey) -> str:
        return f"BM25 » {key.backbone}"


def test_a_new_system_plugs_into_the_plan_and_the_labels(monkeypatch):
    suite = load_suite("smoke")
    before = build_plan(suite, Options())
    monkeypatch.setitem(SYSTEMS._items, "echo", Echo())
    plan = build_plan(suite, Options())
    echo = [c for c in plan.conditions if c.system == "echo"]
    assert plan.conditions[: len(before.conditions)] == before.conditions  # the other rows as they were
    assert len(echo) == len(plan.datasets) == len(plan.conditions) - len(before.conditions)
    bm25 = {c.dataset: c for c in plan.conditions if c.system == "bm25"}
    for c in echo:  # the same stages by id: one search, one evaluate, shared with the BM25 row
        assert c.search.id == bm25[c.dataset].search.id and c.evaluate.id == bm25[c.dataset].evaluate.id
    assert {s.id for s in plan.stages()} == {s.id for s in before.stages()}
    assert system_label(*echo[0].system_key) == "BM25 » first"
    assert run_tag(ConditionResult(key="k", dataset="d", system="echo")) == "echo"
