"""A suite's results as data: ``results/<suite>/results.json`` and ``perquery.csv.gz``.

The folder is self-contained. It holds every condition's aggregates, its per-query values (for the
significance tests), the training outcome with its reason and step, FLOPS and non-zeros, the head
norms, the seed, the subset and the command that reproduces it, and no machine path. Every table,
plot and page is rendered from it alone. ``collect`` is the one function that reads a plan and a
runs folder; everything else reads these files.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.atomic import atomic_write, write_json
from benchmark.errors import BenchmarkError
from benchmark.formats import trec_run
from benchmark.outcomes import COLLAPSED, DEGRADED, MISSING, OK, TRAINING_OUTCOMES
from benchmark.rescale import record_tag

FORMAT = 1
RESULTS = "results.json"
PERQUERY = "perquery.csv.gz"
TELEMETRY_DIR = "telemetry"
RUNS_DIR = "trec"  # the TREC runs, one per condition
PERQUERY_COLUMNS = ["condition", "measure", "query_id", "value"]
#: perquery.csv.gz rows whose condition is a train stage id: the published checkpoint's held-out dev RR@10
DEV_MEASURE = "dev RR@10"

RowKey = tuple[str, str, str, bool]  # (system, backbone, variant, trained): one table row, every seed


@dataclass
class ConditionResult:
    """One system on one dataset with one training seed: what a table needs, and how to redo it."""

    key: str  # unique in the suite; joins perquery.csv.gz
    dataset: str
    system: str  # bm25 | splade
    backbone: str = ""
    variant: str = ""
    factor: str = ""  # the rescale setting as planned ("1", "0.25", "match:bert-base-uncased")
    method: str = ""  # the rescale method's label, "" for an unrescaled head
    trained: bool = False
    seed: int | None = None
    outcome: str = OK  # of the training run: ok | degraded | collapsed; missing while it has not run
    outcome_reason: str = ""
    outcome_step: int | None = None
    outcome_detail: str = ""
    stopped_early: bool = False  # training stopped at its collapse: no model to score
    metrics: dict[str, float] = field(default_factory=dict)  # measure → mean over judged queries
    queries: int | None = None
    FLOPS: float | None = None
    doc_nnz: float | None = None
    query_nnz: float | None = None
    precision: str = ""  # the SPLADE encodings' arithmetic (float32: the exact path; bfloat16 is not)
    scale: float | None = None  # the factor the backbone stage applied (resolved for match)
    rescale: str = ""  # method and factor as applied, and for a matched arm its statistic before → after
    head_norm_before: float | None = None
    head_norm_after: float | None = None
    changed: str = ""  # the head statistic the rescale method moves (benchmark.rescale.SNAPSHOT_LABELS)
    changed_before: float | None = None
    changed_after: float | None = None
    command: str = ""
    evaluate_id: str = ""
    search_id: str = ""
    train_id: str = ""
    backbone_id: str = ""
    telemetry: str = ""  # the training run's telemetry plot, relative to the suite folder
    armed_step: int | None = None  # the first step the outcome triggers were armed (λ final), for the plot
    run_file: str = ""  # the TREC run (descriptive tag, gzipped), relative to the suite folder
    vocab_size: int | None = None  # the trained model's vocabulary (the dense judgement's |V|)
    checkpoint_step: int | None = None  # the published checkpoint's step (the one encoded, scored and judged)

    @property
    def row(self) -> RowKey:
        return (self.system, self.backbone, self.variant, self.trained)

    @property
    def scored(self) -> bool:
        """Evaluated, and not a run that stopped at its collapse (which has no score, never 0)."""
        return bool(self.metrics) and not self.stopped_early

    @property
    def state(self) -> str:
        """What its cells show: a score (ok), "collapsed" without a score, or not run yet (missing)."""
        if self.scored:
            return OK
        return COLLAPSED if self.stopped_early else MISSING


@dataclass
class SuiteResults:
    suite: str
    measures: list[str]
    conditions: list[ConditionResult]
    description: str = ""
    columns: list[str] = field(default_factory=list)  # datasets and groups, in table order
    groups: dict[str, list[str]] = field(default_factory=dict)
    dataset_measures: dict[str, list[str]] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=dict)  # benchmark.suites.Table as data
    max_docs: int | None = None
    max_queries: int | None = None
    seeds: list[int] = field(default_factory=list)
    subset: str | None = None  # None: the suite as declared; else what the command line narrowed
    training: str = ""  # which recipe trained the models (and why, when a slice changed it)
    self_hits_removed: list[str] = field(default_factory=list)  # datasets searched with Pyserini's --remove-query
    # dataset → [documents in its corpus, measures whose depth (cutoff, else the run's k) reaches them all]:
    # a corpus that small is not ranked by those measures (a slice like --max-docs 1), so the tables say so
    unranked: dict[str, list[Any]] = field(default_factory=dict)
    # condition key → measure → query id → value; not in results.json but in perquery.csv.gz
    perquery: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # file name inside the suite folder → where to copy it from (telemetry plots); never written out
    files: dict[str, Path] = field(default_factory=dict)
    # file name inside the suite folder → (a search stage's run.trec, the tag it gets); never written out
    runs: dict[str, tuple[Path, str]] = field(default_factory=dict)

    def column_names(self) -> list[str]:
        return self.columns or list(dict.fromkeys(c.dataset for c in self.conditions))

    def measures_of(self, column: str) -> list[str]:
        """The measures evaluated on a dataset column (a group: on its members)."""
        members = self.groups.get(column) or [column]
        return list(self.dataset_measures.get(members[0], self.measures))

    def settings(self) -> Any:
        from benchmark.config import from_dict
        from benchmark.suites import Table as TableSettings

        return from_dict(TableSettings, self.table or {}, f"{RESULTS} table")


# --------------------------------------------------------------------------- outcomes of a training record


@dataclass(frozen=True)
class TrainOutcome:
    outcome: str
    reason: str = ""
    step: int | None = None
    detail: str = ""
    stopped_early: bool = False

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> "TrainOutcome":
        """A train stage's outcome; None (not run yet) is missing.

        Reads ``outcome``/``outcome_reason``/``outcome_step``/``outcome_detail``/``stopped_early``,
        and the earlier ``status``/``collapse_*`` fields, whose detector always stopped the run.
        """
        if record is None:
            return cls(MISSING)
        if "outcome" in record:
            outcome = record["outcome"]
            if outcome not in TRAINING_OUTCOMES:
                raise BenchmarkError(f"train record outcome {outcome!r} is not one of {', '.join(TRAINING_OUTCOMES)}; "
                                     "rerun that train stage with --force")
            return cls(outcome, str(record.get("outcome_reason") or ""), _int(record.get("outcome_step")),
                       str(record.get("outcome_detail") or ""), bool(record.get("stopped_early")))
        if record.get("status") == COLLAPSED:
            return cls(COLLAPSED, str(record.get("collapse_reason") or ""), _int(record.get("collapse_step")),
                       str(record.get("collapse_detail") or ""), True)
        return cls(OK)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


# --------------------------------------------------------------------------- no machine paths

# an absolute or home path: not after a word, a URL or a '<' (a closing tag such as '</script>'), and
# ending before quotes, whitespace or markup ('<', '>')
_ABSOLUTE = re.compile(r"(?<![\w:/.$~<-])~?/[^\s'\"/<>]+(?:/[^\s'\"/<>]*)*")


def is_machine_path(name: str) -> bool:
    """An absolute or home-relative path: it names a place on one machine."""
    return name.startswith(("/", "~")) or bool(re.match(r"^[A-Za-z]:[\\/]", name))


def portable_dataset(name: str) -> str:
    """A local BEIR folder given by absolute path becomes ``local:<folder>[@split]``; ids stay."""
    if not is_machine_path(name):
        return name
    folder, at, split = name.partition("@")
    return f"local:{Path(folder).name}" + (f"@{split}" if at else "")


def dataset_labels(names: Iterable[str]) -> dict[str, str]:
    """Portable names that stay unique: local folders that share a folder name (``/a/slice`` and
    ``/b/slice``) each get their content digest, ``local:slice~1a2b3c4d``, so no two datasets share a
    column; one folder given twice keeps one name."""
    from benchmark.data import DatasetRef

    places: dict[str, str] = {}  # name as given → the folder@split it reads
    for name in dict.fromkeys(names):
        if is_machine_path(name):
            ref = DatasetRef(name)
            places[name] = f"{ref.local[0]}@{ref.local[1]}" if ref.local is not None else name
    shared: dict[str, set[str]] = {}
    for name, where in places.items():
        shared.setdefault(portable_dataset(name), set()).add(where)
    out: dict[str, str] = {}
    for name in places:
        label = portable_dataset(name)
        if len(shared[label]) > 1:
            folder, at, split = label.partition("@")
            digest = DatasetRef(name).key().rsplit(":", 1)[-1][:8]
            out[name] = f"{folder}~{digest}" + (f"@{split}" if at else "")
    return out


def scrub(text: str, known: Mapping[str, str] = {}) -> str:
    """``text`` without machine paths: known prefixes become their portable names (longest first),
    any other absolute path its last component."""
    for path in sorted(known, key=len, reverse=True):
        text = text.replace(path, known[path])
    return _ABSOLUTE.sub(lambda m: Path(m.group(0)).name or ".", text)


# --------------------------------------------------------------------------- the one reader of a plan and runs/


def collect(plan: Any, store: Any) -> SuiteResults:
    """The suite's results from a plan and its runs folder; nothing is computed.

    Reads ``plan.suite`` (``.name``, ``.description``, ``.table``), ``plan.measures``,
    ``plan.dataset_measures``, ``plan.columns``, ``plan.groups``, ``plan.max_docs``,
    ``plan.max_queries``, ``plan.seeds``, ``plan.subset`` and ``plan.conditions`` (dataset, system,
    backbone, variant, factor, method, trained, seed, evaluate, train, search, command), and through
    ``store.load``/``store.path`` the evaluate (metrics, ``perquery.tsv``), train (outcome,
    ``telemetry.png``), search (FLOPS, non-zeros) and backbone (factor, head norms) stages.
    """
    from benchmark.evaluate import read_perquery

    suite = plan.suite
    root = getattr(store, "root", None)
    known: dict[str, str] = {}
    if root is not None:
        known[str(Path(root).resolve())] = "runs"
        known[str(root)] = "runs"
    names = [*getattr(plan, "columns", []), *(c.dataset for c in plan.conditions)]
    labels = dataset_labels(names)

    def portable(name: str) -> str:
        return labels.get(name) or portable_dataset(name)

    for name in dict.fromkeys(getattr(c, "backbone", "") or "" for c in plan.conditions):
        if is_machine_path(name):  # a local backbone folder: its folder name, as backbone_key gives it
            known[name] = Path(name.rstrip("/\\")).name or name

    for name in names:
        if is_machine_path(name):
            folder = name.partition("@")[0]
            known[folder] = "$DATA/" + portable(name)[len("local:"):].partition("@")[0]

    def load(stage: Any) -> dict[str, Any] | None:
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
        search = getattr(cond, "search", None) or _parent(evaluate, "run")
        backbone = _ancestor(train if train is not None else search, "backbone")
        train_meta, eval_meta = load(train), load(evaluate)
        search_meta = load(search) or {}
        search_record = search_meta.get("record", {})
        if search_meta.get("config", {}).get("remove_query") and portable(cond.dataset) not in removed:
            removed.append(portable(cond.dataset))
        docs_record = (load(_parent(search, "docs")) or {}).get("record", {})
        backbone_record = (load(backbone) or {}).get("record", {})
        changed = str(backbone_record.get("changes") or "head_norm") if backbone_record else ""
        train_record = train_meta["record"] if train_meta is not None else None
        outcome = TrainOutcome.from_record(train_record) if train is not None else TrainOutcome(OK)
        seed = getattr(cond, "seed", None)
        if seed is None and train_record is not None and train_record.get("seed") is not None:
            seed = int(train_record["seed"])  # plans without per-condition seeds: the train record has it
        key = evaluate.id if evaluate is not None else f"{cond.system}-{len(conditions)}"
        while key in used:
            key += "+"
        used.add(key)
        result = ConditionResult(
            key=key, dataset=portable(cond.dataset), system=cond.system, backbone=scrub(cond.backbone, known),
            variant=cond.variant, factor=str(cond.factor), method=str(getattr(cond, "method", "") or ""),
            trained=bool(cond.trained), seed=seed, outcome=outcome.outcome, outcome_reason=outcome.reason,
            outcome_step=outcome.step, outcome_detail=scrub(outcome.detail, known), stopped_early=outcome.stopped_early,
            command=scrub(str(getattr(cond, "command", "") or ""), known),
            evaluate_id=evaluate.id if evaluate is not None else "", search_id=search.id if search is not None else "",
            train_id=train.id if train is not None else "", backbone_id=backbone.id if backbone is not None else "",
            FLOPS=_float(search_record.get("FLOPS")), doc_nnz=_float(search_record.get("doc_nnz")),
            query_nnz=_float(search_record.get("query_nnz")),
            precision=str(docs_record.get("precision") or ""),
            scale=_float(backbone_record.get("factor")),
            rescale=record_tag(backbone_record),
            head_norm_before=_float(backbone_record.get("head_norm_before")),
            head_norm_after=_float(backbone_record.get("head_norm_after")),
            changed=changed,
            changed_before=_float(backbone_record.get(f"{changed}_before")),
            changed_after=_float(backbone_record.get(f"{changed}_after")),
        )
        if eval_meta is not None:
            _note_unranked(unranked, portable(cond.dataset), (load(_parent(evaluate, "corpus")) or {}).get("record", {}),
                           eval_meta["record"].get("metrics", {}), search_record.get("k"))
        if eval_meta is not None and not outcome.stopped_early:
            record = eval_meta["record"]
            result.metrics = {m: float(v) for m, v in record["metrics"].items()}
            result.queries = _int(record.get("queries"))
            try:
                perquery[key] = read_perquery(store.path(evaluate))
            except OSError:
                pass  # an evaluate stage from before per-query values: no significance test for it
        if train_record is not None:
            result.vocab_size = _int(train_record.get("vocab_size"))
            result.checkpoint_step = _int(train_record.get("checkpoint_step"))
            keys, rr = train_record.get("dev_query_keys") or [], train_record.get("dev_rr_published") or []
            if keys and len(keys) == len(rr):  # once per training run, under its stage id
                perquery[train.id] = {DEV_MEASURE: {k: float(v) for k, v in zip(keys, rr)}}
        if train is not None and train_meta is not None:
            png = Path(store.path(train)) / "telemetry.png"
            if png.is_file():
                result.telemetry = f"{TELEMETRY_DIR}/{train.id}.png"
                files[result.telemetry] = png
            rows = Path(store.path(train)) / "telemetry.csv"
            if rows.is_file():  # the page redraws the plot from it, titled with the row, seed and outcome
                files[f"{TELEMETRY_DIR}/{train.id}.csv"] = rows
            result.armed_step = _int((train_record or {}).get("triggers_armed_step"))
        if search is not None and eval_meta is not None and not outcome.stopped_early:
            trec = Path(store.path(search)) / trec_run.RUN
            if trec.is_file():
                result.run_file = f"{RUNS_DIR}/{key}.trec.gz"
                runs[result.run_file] = (trec, run_tag(result))
        conditions.append(result)

    seeds = list(getattr(plan, "seeds", None) or sorted({c.seed for c in conditions if c.seed is not None}))
    settings = dataclasses.asdict(suite.table) if dataclasses.is_dataclass(getattr(suite, "table", None)) else dict(getattr(suite, "table", {}) or {})
    return SuiteResults(
        suite=suite.name, description=scrub(str(getattr(suite, "description", "") or ""), known),
        measures=list(plan.measures), conditions=conditions,
        columns=[portable(c) for c in (getattr(plan, "columns", None) or dict.fromkeys(c.dataset for c in plan.conditions))],
        groups={g: [portable(m) for m in ms] for g, ms in dict(getattr(plan, "groups", {}) or {}).items()},
        dataset_measures={portable(d): list(ms) for d, ms in dict(getattr(plan, "dataset_measures", {}) or {}).items()},
        table=_portable_settings(settings, portable), max_docs=getattr(plan, "max_docs", None),
        max_queries=getattr(plan, "max_queries", None), seeds=[int(s) for s in seeds],
        subset=_subset(plan), training=str(getattr(plan, "training", "") or ""), self_hits_removed=removed,
        unranked=unranked, perquery=perquery, files=files, runs=runs)


def _subset(plan: Any) -> str | None:
    """The plan's subset label; plans that do not carry one: the limits the command line added."""
    if hasattr(plan, "subset"):
        return plan.subset or None
    suite = plan.suite
    parts = [f"{flag}={mine}" for flag, mine, declared in
             (("max-docs", plan.max_docs, getattr(suite, "max_docs", None)),
              ("max-queries", plan.max_queries, getattr(suite, "max_queries", None))) if mine != declared]
    return ",".join(parts) or None


def _portable_settings(settings: dict[str, Any], portable: Any = portable_dataset) -> dict[str, Any]:
    out = json.loads(json.dumps(settings))
    for key in ("measure_for", "labels"):
        out[key] = {portable(d): v for d, v in (out.get(key) or {}).items()}
    for avg in out.get("averages") or []:
        avg["datasets"] = [portable(d) for d in avg["datasets"]]
    return out


def _note_unranked(out: dict[str, list[Any]], dataset: str, corpus: Mapping[str, Any], metrics: Mapping[str, Any],
                   k: Any) -> None:
    """Record the measures whose depth is at least the corpus's size: they see what a system retrieves,
    not how it ranks it (every document of a 1-document slice is in the top 10)."""
    import ir_measures

    docs = corpus.get("documents")
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


def _parent(stage: Any, role: str) -> Any:
    return None if stage is None else dict(getattr(stage, "parents", {}) or {}).get(role)


def _ancestor(stage: Any, kind: str) -> Any:
    """The nearest stage of ``kind`` among ``stage`` and its ancestors (depth first)."""
    seen: set[str] = set()
    todo = [stage] if stage is not None else []
    while todo:
        current = todo.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        if getattr(current.kind, "name", current.kind) == kind:  # a StageKind class, or a StageRef's name
            return current
        todo.extend(reversed(list(dict(current.parents).values())))
    return None


# --------------------------------------------------------------------------- refresh: a plan rebuilt from the record


@dataclass
class StageRef:
    """A stage known by its id only, its parents read from ``runs/<kind>/<id>/config.json`` on demand."""

    kind: str
    id: str
    root: Path

    @property
    def parents(self) -> dict[str, "StageRef"]:
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
    expected: list[Any] = field(default_factory=list)


@dataclass
class _RecordedCondition:
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
    """What ``collect`` needs of a plan, rebuilt from a results record and its stage ids."""

    suite: Any
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

    conditions = [_RecordedCondition(c.dataset, c.system, c.backbone, c.variant, c.factor, c.method, c.trained, c.seed,
                                     stage(c.evaluate_id), stage(c.train_id), stage(c.search_id), c.command)
                  for c in results.conditions]
    return RecordedPlan(_RecordedSuite(results.suite, results.description, results.table), results.measures,
                        results.dataset_measures, results.columns, results.groups, results.max_docs,
                        results.max_queries, results.seeds, results.subset, conditions, results.training)


def refresh(folder: Path, runs: Path) -> SuiteResults:
    """Re-read a suite's conditions from a runs folder, by the stage ids its results record.

    A condition that has a score here but whose evaluate stage is not in ``runs`` stops the refresh:
    the runs folder is the wrong one, and writing would lose results.
    """
    from benchmark.stage import Store

    old = read_results(folder)
    new = collect(recorded_plan(old, runs), Store(runs))
    lost = [o.evaluate_id for o, n in zip(old.conditions, new.conditions) if o.scored and n.state == MISSING]
    if lost:
        raise BenchmarkError(f"{len(lost)} of {len(old.conditions)} scored condition(s) of {folder.name} are not in "
                             f"{runs} (e.g. {lost[0]}); nothing written. Pass the runs folder they were computed in "
                             "as --runs-dir")
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


# --------------------------------------------------------------------------- files


def write_results(results: SuiteResults, folder: Path) -> None:
    """results.json, perquery.csv.gz and the telemetry plots; byte-identical for identical results."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    keep = set()
    for name, source in sorted(results.files.items()):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).resolve() != target.resolve():
            with atomic_write(target, "wb") as fh, open(source, "rb") as src:
                shutil.copyfileobj(src, fh)
        keep.add(target.name)
    for name, (source, tag) in sorted(results.runs.items()):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(target, "wb") as fh:
            fh.write(tagged_run(Path(source), tag))
        keep.add(target.name)
    telemetry = folder / TELEMETRY_DIR
    referenced = {Path(c.telemetry).name for c in results.conditions if c.telemetry}
    if telemetry.is_dir():
        for png in [*telemetry.glob("*.png"), *telemetry.glob("*.csv")]:
            if png.name not in referenced | keep:
                png.unlink()
    run_dir = folder / RUNS_DIR
    if run_dir.is_dir():
        referenced = {Path(c.run_file).name for c in results.conditions if c.run_file}
        for run in run_dir.glob("*.trec.gz"):
            if run.name not in referenced | keep:
                run.unlink()
    write_json(folder / RESULTS, to_json(results))
    with atomic_write(folder / PERQUERY, "wb") as fh:
        fh.write(perquery_bytes(results.perquery))


def to_json(results: SuiteResults) -> dict[str, Any]:
    data = {f.name: getattr(results, f.name) for f in dataclasses.fields(results) if f.name not in ("perquery", "files", "runs")}
    data["conditions"] = [dataclasses.asdict(c) for c in results.conditions]
    data["format"] = FORMAT
    return data


def run_tag(c: ConditionResult) -> str:
    """A TREC run tag that names the system (TREC tags have no spaces): ``bm25``,
    ``splade.bert-tiny.x4.head-norm-4.seed44``, ``splade.bert-tiny.baseline.untrained``."""
    if c.system != "splade":
        return re.sub(r"\s+", "", c.system) or "run"
    parts = [c.system, c.backbone, c.variant.replace(" ", "")]
    if c.method:
        parts.append(f"{c.method}-{c.factor}")
    parts.append(f"seed{c.seed}" if c.trained and c.seed is not None else ("trained" if c.trained else "untrained"))
    return re.sub(r"[^\w.=+:@-]", "_", ".".join(p for p in parts if p))


def tagged_run(source: Path, tag: str) -> bytes:
    """A run file, its sixth column set to ``tag``, gzipped without a timestamp (same run, same bytes)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", filename="", mtime=0) as gz:
        for _, row in trec_run.read_run_lines(source):
            gz.write((trec_run.format_line(row._replace(tag=tag)) + "\n").encode("utf-8"))
    return out.getvalue()


def perquery_bytes(perquery: Mapping[str, Mapping[str, Mapping[str, float]]]) -> bytes:
    """Gzipped CSV, sorted, without a timestamp: the same values give the same bytes."""
    from benchmark.atomic import csv_text

    rows = ({"condition": key, "measure": measure, "query_id": qid, "value": repr(float(value))}
            for key in sorted(perquery) for measure in sorted(perquery[key])
            for qid, value in sorted(perquery[key][measure].items()))
    text = csv_text(rows, PERQUERY_COLUMNS)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", filename="", mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    return buf.getvalue()


def read_perquery_file(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        rows = csv.reader(fh)
        if next(rows, None) != PERQUERY_COLUMNS:
            raise BenchmarkError(f"{path} does not start with the header {','.join(PERQUERY_COLUMNS)}; rewrite it with --refresh")
        for key, measure, qid, value in rows:
            out.setdefault(key, {}).setdefault(measure, {})[qid] = float(value)
    return out


def from_json(data: Mapping[str, Any], where: str) -> SuiteResults:
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise BenchmarkError(f"{where} has format {found!r}, this version reads {FORMAT}; rewrite it with --refresh")
    names = {f.name for f in dataclasses.fields(ConditionResult)}
    try:
        conditions = []
        for i, c in enumerate(data["conditions"]):
            extra = set(c) - names
            if extra:
                raise BenchmarkError(f"{where}: conditions[{i}] has unknown field(s) {', '.join(sorted(extra))}")
            conditions.append(ConditionResult(**c))
        fields = {f.name for f in dataclasses.fields(SuiteResults)} - {"perquery", "files", "runs", "conditions"}
        kwargs = {k: data[k] for k in fields if k in data}
        return SuiteResults(conditions=conditions, **kwargs)
    except (KeyError, TypeError) as exc:
        raise BenchmarkError(f"{where} is incomplete or malformed ({exc}); rewrite it with --refresh") from None


def read_results(folder: Path) -> SuiteResults:
    """A suite folder's results; a damaged or missing file is one line naming it."""
    path = Path(folder) / RESULTS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchmarkError(f"{path} cannot be read ({exc.strerror}); rerun the suite or --refresh it") from None
    except ValueError as exc:
        raise BenchmarkError(f"{path} is not valid JSON ({exc}); rerun the suite or --refresh it") from None
    results = from_json(data, str(path))
    pq = Path(folder) / PERQUERY
    if pq.is_file():
        try:
            results.perquery = read_perquery_file(pq)
        except (OSError, EOFError, ValueError, csv.Error) as exc:
            raise BenchmarkError(f"{pq} is damaged ({exc}); rerun the suite or --refresh it") from None
    return results


def outcome_counts(conditions: Iterable[ConditionResult]) -> dict[str, int]:
    """Training outcomes over distinct seeds (a seed's runs share one training run)."""
    by_seed: dict[Any, str] = {}
    order = {o: i for i, o in enumerate((OK, DEGRADED, COLLAPSED))}
    for c in conditions:
        if c.outcome == MISSING:
            continue
        seen = by_seed.get(c.seed)
        by_seed[c.seed] = c.outcome if seen is None or order[c.outcome] > order[seen] else seen
    counts: dict[str, int] = {}
    for outcome in by_seed.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts
