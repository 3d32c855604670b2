"""The one reader of a plan and its runs folder: ``collect`` turns finished stages into a suite's
results, and ``refresh`` re-reads a results folder's conditions by the stage ids it records. Nothing
here computes; everything after it reads ``results.json``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.evaluation.measures import means
from benchmark.formats import trec_run
from benchmark.formats.perquery import perquery_path, read_perquery
from benchmark.model.identity import local_folder, model_label
from benchmark.pipeline.views import PlanView
from benchmark.report.portable import dataset_labels, is_machine_path, portable_dataset, scrub
from benchmark.report.results import (
    DEV_MEASURE,
    RUNS_DIR,
    TELEMETRY_DIR,
    ConditionResult,
    SuiteResults,
    TrainOutcome,
    _float,
    _int,
    read_results,
    run_tag,
)
from benchmark.stages.records import (
    BackboneRecord,
    CorpusRecord,
    EncodeRecord,
    EvaluateRecord,
    SearchRecord,
    StageRecord,
    TrainRecord,
    parse,
)
from benchmark.stages.store import StageView, Store
from benchmark.training.outcomes import MISSING, OK


def collect(plan: PlanView, store: Store) -> SuiteResults:
    """The suite's results from a plan and its runs folder; nothing is computed.

    Reads what ``PlanView`` names, and through ``store.load``/``store.path`` the evaluate (metrics,
    ``perquery.tsv``), train (outcome, ``telemetry.png``), search (FLOPS, non-zeros) and backbone
    (factor, head norms) stages.
    """
    suite = plan.suite
    root = store.root
    known: dict[str, str] = {str(Path(root).resolve()): "runs", str(root): "runs"}
    names = [*plan.columns, *(c.dataset for c in plan.conditions)]
    labels = dataset_labels(names)

    def portable(name: str) -> str:
        return labels.get(name) or portable_dataset(name)

    for name in dict.fromkeys(c.backbone for c in plan.conditions):
        if is_machine_path(name):  # a local backbone folder: its folder name, as backbone_key gives it
            known[name] = Path(name.rstrip("/\\")).name or name

    for name in names:
        if is_machine_path(name):
            folder = name.partition("@")[0]
            known[folder] = "$DATA/" + portable(name)[len("local:") :].partition("@")[0]

    def load(stage: StageView | None) -> dict[str, Any] | None:
        return store.load(stage) if stage is not None else None

    conditions: list[ConditionResult] = []
    perquery: dict[str, dict[str, dict[str, float]]] = {}
    files: dict[str, Path] = {}
    runs: dict[str, tuple[Path, str]] = {}
    used: set[str] = set()
    removed: list[str] = []
    unranked: dict[str, list[Any]] = {}
    for cond in plan.conditions:
        evaluate, train = cond.evaluate, cond.train
        search = cond.search or _parent(evaluate, "run")
        backbone = _ancestor(train if train is not None else search, "backbone")
        train_meta, eval_meta, search_meta = load(train), load(evaluate), load(search)
        ranked = parse(search_meta or {}, StageRecord)  # a search stage's, or a --run file's
        search_record = ranked if isinstance(ranked, SearchRecord) else SearchRecord()
        if (
            search_meta is not None
            and search_meta.get("config", {}).get("remove_query")
            and portable(cond.dataset) not in removed
        ):
            removed.append(portable(cond.dataset))
        docs_record = parse(load(_parent(search, "docs")) or {}, EncodeRecord)
        backbone_meta = load(backbone)
        backbone_record = parse(backbone_meta, BackboneRecord) if backbone_meta is not None else None
        changed = (backbone_record.changes or "head_norm") if backbone_record is not None else ""
        train_record = parse(train_meta, TrainRecord) if train_meta is not None else None
        outcome = TrainOutcome.from_record(train_record) if train is not None else TrainOutcome(OK)
        seed = cond.seed
        if seed is None and train_record is not None and train_record.seed is not None:
            seed = int(train_record.seed)  # plans without per-condition seeds: the train record has it
        moved = backbone_record.moved() if backbone_record is not None else (None, None)
        key = evaluate.id if evaluate is not None else f"{cond.system}-{len(conditions)}"
        while key in used:
            key += "+"
        used.add(key)
        result = ConditionResult(
            key=key,
            dataset=portable(cond.dataset),
            system=cond.system,
            backbone=model_label(cond.backbone) if local_folder(cond.backbone) else scrub(cond.backbone, known),
            variant=cond.variant,
            factor=str(cond.factor),
            method=cond.method,
            trained=bool(cond.trained),
            seed=seed,
            outcome=outcome.outcome,
            outcome_reason=outcome.reason,
            outcome_step=outcome.step,
            outcome_detail=scrub(outcome.detail, known),
            stopped_early=outcome.stopped_early,
            command=scrub(cond.command, known),
            evaluate_id=evaluate.id if evaluate is not None else "",
            search_id=search.id if search is not None else "",
            index_id=index.id if (index := _parent(search, "index")) is not None else "",
            train_id=train.id if train is not None else "",
            backbone_id=backbone.id if backbone is not None else "",
            FLOPS=_float(search_record.FLOPS),
            doc_nnz=_float(search_record.doc_nnz),
            query_nnz=_float(search_record.query_nnz),
            past_float32=_int(search_record.queries_past_float32) or 0,
            rescored_exactly=_int(search_record.queries_rescored_exactly) or 0,
            precision=str(docs_record.precision or ""),
            scale=_float(backbone_record.factor) if backbone_record is not None else None,
            rescale=backbone_record.tag if backbone_record is not None else "",
            head_norm_before=_float(backbone_record.head_norm_before) if backbone_record is not None else None,
            head_norm_after=_float(backbone_record.head_norm_after) if backbone_record is not None else None,
            changed=changed,
            changed_before=_float(moved[0]),
            changed_after=_float(moved[1]),
        )
        evaluation = parse(eval_meta, EvaluateRecord) if eval_meta is not None else None
        if evaluation is not None:
            corpus = parse(load(_parent(evaluate, "corpus")) or {}, CorpusRecord)
            _note_unranked(
                unranked, portable(cond.dataset), corpus.recorded("documents"), evaluation.metrics, search_record.k
            )
        if evaluate is not None and evaluation is not None and not outcome.stopped_early:
            result.metrics = {m: float(v) for m, v in evaluation.metrics.items()}
            result.queries = _int(evaluation.recorded("queries"))
            try:
                perquery[key] = read_perquery(perquery_path(store.path(evaluate)))
            except OSError:
                pass  # an evaluate stage from before per-query values: no significance test for it
            else:  # the tables' means come from the per-query values, not from the record beside them
                derived = means(perquery[key])
                result.metrics = {m: derived.get(m, v) for m, v in result.metrics.items()}
        if train_record is not None:
            result.vocab_size = _int(train_record.vocab_size)
            result.checkpoint_step = _int(train_record.checkpoint_step)
            keys, rr = train_record.dev_query_keys or [], train_record.dev_rr_published or []
            if train is not None and keys and len(keys) == len(rr):  # once per training run, under its stage id
                perquery[train.id] = {DEV_MEASURE: {k: float(v) for k, v in zip(keys, rr)}}
        if train is not None and train_meta is not None:
            png = Path(store.path(train)) / "telemetry.png"
            if png.is_file():
                result.telemetry = f"{TELEMETRY_DIR}/{train.id}.png"
                files[result.telemetry] = png
            rows = Path(store.path(train)) / "telemetry.csv"
            if rows.is_file():  # the page redraws the plot from it, titled with the row, seed and outcome
                files[f"{TELEMETRY_DIR}/{train.id}.csv"] = rows
            result.armed_step = _int(train_record.triggers_armed_step) if train_record is not None else None
        if search is not None and eval_meta is not None and not outcome.stopped_early:
            trec = Path(store.path(search)) / trec_run.RUN
            if trec.is_file():
                result.run_file = f"{RUNS_DIR}/{key}.trec.gz"
                runs[result.run_file] = (trec, run_tag(result))
        conditions.append(result)

    seeds = list(plan.seeds or sorted({c.seed for c in conditions if c.seed is not None}))
    return SuiteResults(
        suite=suite.name,
        description=scrub(suite.description or "", known),
        measures=list(plan.measures),
        conditions=conditions,
        columns=[portable(c) for c in (plan.columns or dict.fromkeys(c.dataset for c in plan.conditions))],
        groups={g: [portable(m) for m in ms] for g, ms in plan.groups.items()},
        dataset_measures={portable(d): list(ms) for d, ms in plan.dataset_measures.items()},
        table=_portable_settings(_settings(suite.table), portable),
        max_docs=plan.max_docs,
        max_queries=plan.max_queries,
        seeds=[int(s) for s in seeds],
        subset=plan.subset or None,
        training=plan.training,
        self_hits_removed=removed,
        unranked=unranked,
        expected=_expected(suite.expected, portable),
        perquery=perquery,
        files=files,
        runs=runs,
    )


def _expected(entries: Sequence[object] | None, portable: Callable[[str], str]) -> list[dict[str, Any]] | None:
    """The suite's [[expected]] entries as data, datasets named as the conditions are (None: not recorded)."""
    if entries is None:
        return None
    out = [
        dataclasses.asdict(e) if dataclasses.is_dataclass(e) and not isinstance(e, type) else dict(e)  # type: ignore[call-overload]
        for e in entries
    ]
    return [{**e, "dataset": portable(e["dataset"])} for e in out]


def _settings(table: object) -> dict[str, Any]:
    """A suite's ``[table]`` settings as a dict: a ``benchmark.suites.Table``, or the dict results.json holds."""
    if dataclasses.is_dataclass(table) and not isinstance(table, type):
        return dataclasses.asdict(table)
    return dict(table) if isinstance(table, Mapping) else {}


def _portable_settings(settings: dict[str, Any], portable: Callable[[str], str] = portable_dataset) -> dict[str, Any]:
    out = json.loads(json.dumps(settings))
    for key in ("measure_for", "labels"):
        out[key] = {portable(d): v for d, v in (out.get(key) or {}).items()}
    for avg in out.get("averages") or []:
        avg["datasets"] = [portable(d) for d in avg["datasets"]]
    return out


def _note_unranked(
    out: dict[str, list[Any]], dataset: str, docs: int | None, metrics: Mapping[str, Any], k: int | None
) -> None:
    """Record the measures whose depth is at least the corpus's size: they see what a system retrieves,
    not how it ranks it (every document of a 1-document slice is in the top 10)."""
    import ir_measures

    if not isinstance(docs, int):
        return
    for name in metrics:
        try:
            depth = ir_measures.parse_measure(name).params.get("cutoff") or k
        except Exception:
            continue
        if isinstance(depth, int) and depth >= docs:
            entry = out.setdefault(dataset, [docs, []])
            if name not in entry[1]:
                entry[1].append(name)


def _parent(stage: StageView | None, role: str) -> StageView | None:
    return None if stage is None else stage.parents.get(role)


def _ancestor(stage: StageView | None, kind: str) -> StageView | None:
    """The nearest stage of ``kind`` among ``stage`` and its ancestors (depth first)."""
    seen: set[str] = set()
    todo = [stage] if stage is not None else []
    while todo:
        current = todo.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        if current.name == kind:
            return current
        todo.extend(reversed(list(current.parents.values())))
    return None


# --------------------------------------------------------------------------- refresh: a plan rebuilt from the record


@dataclass
class StageRef:
    """A stage known by its id only, its parents read from ``runs/<kind>/<id>/config.json`` on demand."""

    kind: str
    id: str
    root: Path

    @property
    def name(self) -> str:
        return self.kind

    @property
    def parents(self) -> dict[str, StageRef]:
        try:
            ids = json.loads((self.root / self.kind / self.id / "config.json").read_text(encoding="utf-8"))["parents"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        return {role: ref(pid, self.root) for role, pid in ids.items()}

    def __hash__(self) -> int:
        return hash(self.id)


def ref(stage_id: str, root: Path) -> StageRef:
    return StageRef(stage_id.rsplit("-", 1)[0], stage_id, Path(root))


@dataclass
class _RecordedSuite:
    name: str
    description: str
    table: dict[str, Any]
    expected: list[Any] | None = None  # as the results recorded them (None: not recorded)


@dataclass
class _RecordedCondition:
    """A ``ConditionView`` from a results record."""

    dataset: str
    system: str
    backbone: str
    variant: str
    factor: str
    method: str
    trained: bool
    seed: int | None
    evaluate: StageRef | None
    train: StageRef | None
    search: StageRef | None
    command: str


@dataclass
class RecordedPlan:
    """A ``PlanView`` rebuilt from a results record and its stage ids."""

    suite: _RecordedSuite
    measures: list[str]
    dataset_measures: dict[str, list[str]]
    columns: list[str]
    groups: dict[str, list[str]]
    max_docs: int | None
    max_queries: int | None
    seeds: list[int]
    subset: str | None
    conditions: list[_RecordedCondition]
    training: str = ""


def recorded_plan(results: SuiteResults, runs: Path) -> RecordedPlan:
    def stage(stage_id: str) -> StageRef | None:
        return ref(stage_id, runs) if stage_id else None

    conditions = [
        _RecordedCondition(
            c.dataset,
            c.system,
            c.backbone,
            c.variant,
            c.factor,
            c.method,
            c.trained,
            c.seed,
            stage(c.evaluate_id),
            stage(c.train_id),
            stage(c.search_id),
            c.command,
        )
        for c in results.conditions
    ]
    return RecordedPlan(
        _RecordedSuite(results.suite, results.description, results.table, results.expected),
        results.measures,
        results.dataset_measures,
        results.columns,
        results.groups,
        results.max_docs,
        results.max_queries,
        results.seeds,
        results.subset,
        conditions,
        results.training,
    )


def refresh(folder: Path, runs: Path) -> SuiteResults:
    """Re-read a suite's conditions from a runs folder, by the stage ids its results record.

    A condition that has a score here but whose evaluate stage is not in ``runs`` stops the refresh:
    the runs folder is the wrong one, and writing would lose results.
    """
    old = read_results(folder)
    new = collect(recorded_plan(old, runs), Store(runs))
    lost = [o.evaluate_id for o, n in zip(old.conditions, new.conditions) if o.scored and n.state == MISSING]
    if lost:
        raise BenchmarkError(
            f"{len(lost)} of {len(old.conditions)} scored condition(s) of {folder.name} are not in "
            f"{runs} (e.g. {lost[0]}); nothing written. Pass the runs folder they were computed in "
            "as --runs-dir"
        )
    # a search stage gone while its evaluation stays: the scores would stand without their FLOPS, non-zeros
    # and past-2^24 flag, blank cells and a missing mark rather than a refusal
    gone = [
        o.search_id
        for o, n in zip(old.conditions, new.conditions)
        if o.search_id and (o.FLOPS is not None or o.past_float32) and n.FLOPS is None and not n.past_float32
    ]
    if gone:
        raise BenchmarkError(
            f"{len(gone)} search stage(s) of {folder.name} are not in {runs} (e.g. {gone[0]}), though their "
            "evaluations are: their FLOPS, non-zeros and past-2^24 flags would be lost; nothing written. Pass the "
            "runs folder they were computed in as --runs-dir, or rerun the suite to recompute them"
        )
    perquery: dict[str, dict[str, dict[str, float]]] = {}
    for o, n in zip(old.conditions, new.conditions):
        if n.key in new.perquery:
            perquery[o.key] = new.perquery[n.key]
        if n.train_id in new.perquery:  # a training run's dev values, under its stage id
            perquery[n.train_id] = new.perquery[n.train_id]
        n.key = o.key  # keys stay stable across refreshes
        n.command = n.command or o.command
    new.perquery = perquery
    return new
