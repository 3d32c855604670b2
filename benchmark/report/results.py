"""A suite's results as data: ``results/<suite>/results.json`` and ``perquery.csv.gz``.

The folder is self-contained. It holds every condition's aggregates, its per-query values (for the
significance tests), the training outcome with its reason and step, FLOPS and non-zeros, the head
norms, the seed, the subset and the command that reproduces it, and no machine path. Every table,
plot and page is rendered from it alone. ``benchmark.report.collect`` is the one reader of a plan and
a runs folder; everything else reads these files.
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
from typing import Any, cast

from benchmark.common.atomic import atomic_write, write_json
from benchmark.common.confine import confined
from benchmark.common.errors import BenchmarkError
from benchmark.formats import trec_run
from benchmark.pipeline.systems import RowKey, system
from benchmark.stages.records import TrainRecord
from benchmark.training.outcomes import COLLAPSED, DEGRADED, MISSING, OK, TRAINING_OUTCOMES

FORMAT = 1
RESULTS = "results.json"
PERQUERY = "perquery.csv.gz"
TELEMETRY_DIR = "telemetry"
RUNS_DIR = "trec"  # the TREC runs, one per condition
STAGE_LOG = "stages.csv"  # written by the run (benchmark.report.build.write_stage_log): each stage's seconds and bytes
PERQUERY_COLUMNS = ["condition", "measure", "query_id", "value"]
#: perquery.csv.gz rows whose condition is a train stage id: the published checkpoint's held-out dev RR@10
DEV_MEASURE = "dev RR@10"


@dataclass
class ConditionResult:
    """One system on one dataset with one training seed: what a table needs, and how to redo it."""

    key: str  # unique in the suite; joins perquery.csv.gz
    dataset: str
    system: str  # bm25 | splade
    backbone: str = ""
    variant: str = ""
    # the arm's rescale setting as planned, a label ("1", "0.25", "match:bert-base-uncased"); results.json format 1 key
    factor: str = ""
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
    scale: float | None = None  # the number the backbone stage applied (``factor`` resolved, for match arms too)
    rescale: str = ""  # method and factor as applied, and for a matched arm its statistic before → after
    head_norm_before: float | None = None
    head_norm_after: float | None = None
    changed: str = ""  # the head statistic the rescale method moves (benchmark.model.rescale.SNAPSHOT_LABELS)
    changed_before: float | None = None
    changed_after: float | None = None
    command: str = ""
    evaluate_id: str = ""
    search_id: str = ""
    index_id: str = ""  # the search's index (its size is in stages.csv); "" in results written before it was kept
    train_id: str = ""
    backbone_id: str = ""
    telemetry: str = ""  # the training run's telemetry plot, relative to the suite folder
    armed_step: int | None = None  # the first step the outcome triggers were armed (λ final), for the plot
    run_file: str = ""  # the TREC run (descriptive tag, gzipped), relative to the suite folder
    vocab_size: int | None = None  # the trained model's vocabulary (the dense judgement's |V|)
    checkpoint_step: int | None = None  # the published checkpoint's step (the one encoded, scored and judged)
    past_float32: int = 0  # queries whose summed impacts reached 2**24, where Lucene's float32 rounds
    rescored_exactly: int = 0  # of those, the ones whose hits were rescored to exact integers

    @property
    def row(self) -> RowKey:
        return RowKey(self.system, self.backbone, self.variant, self.trained)

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
    # the suite's [[expected]] entries (benchmark.suites.Expected as data), checked on the page as --check
    # checks them; None: results written before they were kept
    expected: list[dict[str, Any]] | None = None
    # stage id → {"stage", "seconds", "bytes"} from stages.csv, in the run's order; not in results.json
    stage_log: dict[str, dict[str, Any]] = field(default_factory=dict)
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
        from benchmark.common.config import from_dict
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
    def from_record(cls, record: TrainRecord | Mapping[str, Any] | None) -> TrainOutcome:
        """A train stage's outcome (its record, or the record's JSON: ``TrainRecord.from_json`` reads the
        records of earlier VERSIONs); None (not run yet) is missing."""
        if record is None:
            return cls(MISSING)
        if not isinstance(record, TrainRecord):
            record = TrainRecord.from_json(record)
        if record.outcome not in TRAINING_OUTCOMES:
            raise BenchmarkError(
                f"train record outcome {record.outcome!r} is not one of {', '.join(TRAINING_OUTCOMES)}; "
                "rerun that train stage with --force"
            )
        return cls(
            record.outcome,
            str(record.outcome_reason or ""),
            _int(record.outcome_step),
            str(record.outcome_detail or ""),
            bool(record.stopped_early),
        )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


# --------------------------------------------------------------------------- files


def write_results(results: SuiteResults, folder: Path) -> None:
    """results.json, perquery.csv.gz and the telemetry plots; byte-identical for identical results."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    keep = set()
    for name, source in sorted(results.files.items()):
        target = confined(folder, name, "a copied file's name")
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).resolve() != target.resolve():
            with atomic_write(target, "wb") as fh, open(source, "rb") as src:
                shutil.copyfileobj(src, fh)
        keep.add(target.name)
    for name, (source, tag) in sorted(results.runs.items()):
        target = confined(folder, name, "a run file's name")
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(target, "wb") as fh:
            write_tagged_run(Path(source), tag, fh)
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


_NOT_IN_JSON = ("perquery", "files", "runs", "stage_log")


def to_json(results: SuiteResults) -> dict[str, Any]:
    data = {f.name: getattr(results, f.name) for f in dataclasses.fields(results) if f.name not in _NOT_IN_JSON}
    data["conditions"] = [dataclasses.asdict(c) for c in results.conditions]
    if data["expected"] is None:  # not recorded: left out, as results written before it
        del data["expected"]
    data["format"] = FORMAT
    return data


def run_tag(c: ConditionResult) -> str:
    """A TREC run tag that names the system (TREC tags have no spaces), distinct per row: ``bm25``,
    ``splade.bert-tiny.x4.head-norm-4.seed44``, ``splade.bert-tiny.baseline.untrained``,
    ``published.naver_splade-v3``, ``run.mine`` (a ``--run`` file by its name)."""
    return system(c.system).tag(c)


def tagged_run(source: Path, tag: str) -> bytes:
    """A run file, its sixth column set to ``tag``, gzipped without a timestamp (same run, same bytes)."""
    out = io.BytesIO()
    write_tagged_run(source, tag, out)
    return out.getvalue()


def write_tagged_run(source: Path, tag: str, fh: Any) -> None:
    """``tagged_run`` streamed into ``fh``, a block of lines at a time: an MS MARCO run (7M lines) never
    sits in memory, whole or gzipped."""
    with gzip.GzipFile(fileobj=fh, mode="wb", filename="", mtime=0) as gz:
        block: list[str] = []
        for _, row in trec_run.read_run_lines(source):
            block.append(trec_run.format_line(row._replace(tag=tag)))
            if len(block) >= 10_000:
                gz.write(("\n".join(block) + "\n").encode("utf-8"))
                block.clear()
        if block:
            gz.write(("\n".join(block) + "\n").encode("utf-8"))


def perquery_bytes(perquery: Mapping[str, Mapping[str, Mapping[str, float]]]) -> bytes:
    """Gzipped CSV, sorted, without a timestamp: the same values give the same bytes."""
    from benchmark.common.atomic import csv_text

    rows = (
        {"condition": key, "measure": measure, "query_id": qid, "value": repr(float(value))}
        for key in sorted(perquery)
        for measure in sorted(perquery[key])
        for qid, value in sorted(perquery[key][measure].items())
    )
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
            raise BenchmarkError(
                f"{path} does not start with the header {','.join(PERQUERY_COLUMNS)}; rewrite it with --refresh"
            )
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
            problem = _escaping(c)
            if problem:
                raise BenchmarkError(
                    f"{where}: conditions[{i}].{problem}; a results folder only names files inside "
                    "itself: correct or remove that entry, or --refresh the folder from its runs"
                )
            conditions.append(ConditionResult(**c))
        fields = {f.name for f in dataclasses.fields(SuiteResults)} - set(_NOT_IN_JSON) - {"conditions"}
        kwargs = {k: data[k] for k in fields if k in data}
        return SuiteResults(conditions=conditions, **kwargs)
    except (KeyError, TypeError) as exc:
        raise BenchmarkError(f"{where} is incomplete or malformed ({exc}); rewrite it with --refresh") from None


#: fields of a condition that name files inside the suite folder, and the ids that name stage folders (read
#: by --refresh and export under the runs folder; the key only joins perquery.csv.gz and names no file)
PATH_FIELDS = ("telemetry", "run_file")
ID_FIELDS = ("evaluate_id", "search_id", "train_id", "backbone_id")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=:@-]*$")


def _escaping(condition: Mapping[str, Any]) -> str | None:
    """The first field of a recorded condition that would lead a reader or writer outside its folder, or None."""
    from benchmark.common.confine import escape

    for name in PATH_FIELDS:
        value = condition.get(name)
        if value and (reason := escape(value)):
            return f"{name} {value!r} leads outside the folder ({reason})"
    for name in ID_FIELDS:
        value = condition.get(name)
        if value and (not isinstance(value, str) or not _ID.match(value)):
            return f"{name} {value!r} is not a stage id (letters, digits and -_.+=:@, no '/')"
    return None


def derive_means(results: SuiteResults, where: str) -> list[str]:
    """Each scored condition's means and query count from its per-query values, never from the recorded
    means (which ``results.json`` keeps for readers): a recorded mean that is not its values' mean is
    replaced by it, and named in the returned lines, first. Within MEAN_SLACK, the recorded value stays
    (the evaluate stage summed the same values in its own order)."""
    from benchmark.evaluation.measures import means

    found: list[str] = []
    for c in results.conditions:
        values = results.perquery.get(c.key)
        if not values or not c.metrics:
            continue
        derived = means({m: v for m, v in values.items() if m in c.metrics})
        for measure, mean in derived.items():
            recorded = c.metrics[measure]
            if not isinstance(recorded, (int, float)) or not abs(recorded - mean) <= MEAN_SLACK * max(1.0, abs(mean)):
                row = " ".join(filter(None, (c.system, c.backbone, c.variant)))
                found.append(
                    f"{where} gives {measure} = {recorded!r} for {row} on {c.dataset}, "
                    f"but its {len(values[measure])} per-query values in {PERQUERY} average {mean:.4f}"
                )
                c.metrics[measure] = mean
        counts = {len(v) for m, v in values.items() if m in c.metrics}
        if len(counts) == 1:
            c.queries = counts.pop()
    return found


#: how far a recorded mean may be from its per-query values' mean: float summation order alone (1e-12 relative;
#: a mean over n values summed in two orders differs by at most about n · 2**-53 relative)
MEAN_SLACK = 1e-12


def read_results(folder: Path, warn: Any = None) -> SuiteResults:
    """A suite folder's results; a damaged or missing file is one line naming it. Means are derived from
    the per-query values; where ``results.json`` disagrees, ``warn`` (default: stderr) gets one line."""
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
        found = derive_means(results, str(path))
        if found:
            more = f" (and {len(found) - 1} more mean(s))" if len(found) > 1 else ""
            line = f"warning: {found[0]}{more}; the per-query values are used (rewrite results.json with --refresh)"
            if warn is None:
                import sys

                print(line, file=sys.stderr)
            else:
                warn(line)
    log = Path(folder) / STAGE_LOG
    if log.is_file():
        try:
            results.stage_log = read_stage_log(log)
        except (OSError, ValueError, KeyError, csv.Error) as exc:
            raise BenchmarkError(f"{log} is damaged ({exc}); rerun the suite to rewrite it") from None
    return results


def read_stage_log(path: Path) -> dict[str, dict[str, Any]]:
    """stages.csv: stage id → its kind, the seconds it took when computed and its bytes on disk, in the
    run's order (the plan's: parents first)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return {
            row["id"]: {"stage": row["stage"], "seconds": float(row["seconds"]), "bytes": int(row["bytes"])}
            for row in csv.DictReader(fh)
        }


def index_ids(results: SuiteResults) -> dict[str, str]:
    """Search stage id → the id of the index it searched: as recorded, else from the stage log's order.

    The log lists the plan's stages parents first, one condition after another, so a search's index
    is the last index logged before it with no other search in between (an index shared by two
    searches, or a log without the index, leaves the later search without one: never a guess)."""
    out: dict[str, str] = {}
    last: str | None = None
    for stage_id, row in results.stage_log.items():
        if row["stage"] == "index":
            last = stage_id
        elif row["stage"] == "search":
            if last is not None:
                out[stage_id] = last
            last = None
    for c in results.conditions:
        if c.index_id and c.search_id:
            out[c.search_id] = c.index_id
    return out


def efficiency(results: SuiteResults) -> dict[str, dict[str, float | None]]:
    """Condition key → ``search_ms`` (its search stage's wall time over its queries, in ms) and
    ``index_bytes`` (its index on disk), from stages.csv; None where the log lacks the stage, and for a
    ``--run`` file, whose stage reads the file: its seconds are no search's."""
    indexes = index_ids(results)
    out: dict[str, dict[str, float | None]] = {}
    for c in results.conditions:
        search = results.stage_log.get(c.search_id) if c.search_id else None
        index = results.stage_log.get(indexes.get(c.search_id, "")) if c.search_id else None
        searched = search is not None and c.queries and c.scored and system(c.system).searches
        ms = 1000 * cast("dict[str, Any]", search)["seconds"] / c.queries if searched else None  # searched: not None
        out[c.key] = {"search_ms": ms, "index_bytes": float(index["bytes"]) if index is not None and c.scored else None}
    return out


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
