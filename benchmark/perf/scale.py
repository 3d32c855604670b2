"""``python -m benchmark.perf scale``: the whole pipeline rehearsed at growing corpus sizes, before a GPU bill.

For each size N a synthetic BEIR folder (``benchmark.data.synthetic_corpus``: SciFact's vocabulary and
lengths, about 7,000 queries, one judged document each) goes through the stage graph an ad-hoc run
plans for it: corpus, topics, BM25 index, search and evaluation; and SPLADE with the ``scale-bert``
backbone (bert-base's vocabulary, ~200 non-zeros per document): encode, queries, impact index, search,
evaluation; then the report (tables, page, gzipped TREC exports). Each stage runs in its own process
(``python -m benchmark.run`` with ``BENCHMARK_SCALE_STAGE`` naming the stage), so its wall time, CPU
time (itself and its children: the indexer's JVM) and peak resident memory (VmHWM, reset when the
stage starts; the largest child's, separately) are its own. Bytes on disk are the stage folder's.

From these, ``scale.md`` fits each stage's exponent of time in N (least squares on log-log), compares
peak memory from the second-largest size to the largest, and projects core-hours, memory and disk to
MS MARCO (8.8M passages) and the BEIR-13 corpora. ``scale.csv`` holds the measurements, ``scale.png``
the curves.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark.common.atomic import write_csv, write_json, write_text
from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.budget import CORPORA

#: set by the driver for each child ``python -m benchmark.run``: ``STAGE_ID=JSON_PATH`` (or ``report=…``)
STAGE_ENV = "BENCHMARK_SCALE_STAGE"
BACKBONE = "scale-bert"
#: BEIR-13's test queries per corpus, BEIR paper Table 1 (documents: the compute budget's ``CORPORA``, the
#: same table): each query searches its own corpus, so a search costs by its corpus's size, not all 13 together
BEIR13_QUERIES: dict[str, int] = {
    "beir/trec-covid": 50,
    "beir/nfcorpus": 323,
    "beir/nq": 3_452,
    "beir/hotpotqa": 7_405,
    "beir/fiqa": 648,
    "beir/arguana": 1_406,
    "beir/webis-touche2020/v2": 49,
    "beir/dbpedia-entity": 400,
    "beir/scidocs": 1_000,
    "beir/climate-fever": 1_535,
    "beir/scifact": 300,
    "beir/quora": 10_000,
    "beir/fever": 6_666,
}
#: BEIR-13's corpora as (documents, test queries)
BEIR13: tuple[tuple[int, int], ...] = tuple((CORPORA[c][0], q) for c, q in BEIR13_QUERIES.items())
#: what the curves are projected to: (name, its corpora as (documents, queries))
TARGETS: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = (
    ("MS MARCO passage (dev)", ((CORPORA["msmarco-passage"][0], 6_980),)),
    ("BEIR-13, each corpus on its own", BEIR13),
    ("the largest BEIR-13 corpus (Climate-FEVER)", ((CORPORA["beir/climate-fever"][0], 1_535),)),
)
COLUMNS = [
    "documents",
    "queries",
    "stage",
    "system",
    "wall_s",
    "cpu_s",
    "peak_mb",
    "child_peak_mb",
    "disk_bytes",
    "bytes_per_doc",
    "lucene_ms_per_query",
    "start_mb",
    "measured_at",
]


@dataclass
class Measurement:
    documents: int
    queries: int
    stage: str  # a stage kind, or "report"
    system: str  # bm25, splade or "" (shared)
    wall_s: float
    cpu_s: float
    peak_mb: float  # this process's peak resident set during the stage
    child_peak_mb: float  # the largest child's (the Lucene indexer's JVM), 0 without one
    disk_bytes: int
    lucene_ms_per_query: float | None = None  # search stages: Lucene's own batch-search seconds per query
    start_mb: float | None = None  # the resident set when the stage began (interpreter, imports, plan)
    measured_at: str | None = None  # UTC date and minute the measurement was written (a reused one keeps its own)

    @property
    def peak(self) -> float:
        """The stage's peak in MB: its process's, or the indexer JVM's where larger."""
        return max(self.peak_mb, self.child_peak_mb)

    @property
    def bytes_per_doc(self) -> float:
        return self.disk_bytes / self.documents


# --------------------------------------------------------------------------- inside the child process


def _rss_peak_reset() -> None:
    """Start VmHWM afresh from the current resident set (Linux: ``5`` to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _status_mb(key: str = "VmHWM") -> float:
    """A /proc/self/status figure in MB: the peak resident set (VmHWM) by default, or the current one (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _utc_minute(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def run_one(plan: Any, store: Any, results_dir: Path, folder: str, threads: int, spec: str) -> int:
    """In the child: compute the one stage ``spec`` names (its parents are finished), or write the report,
    and write what it cost as JSON. Called by ``benchmark.run`` when ``BENCHMARK_SCALE_STAGE`` is set."""
    from benchmark.pipeline.executor import run_stage
    from benchmark.stages import Context

    target, _, out = spec.partition("=")
    stages = {s.id: s for s in plan.stages()}
    if target != "report" and target not in stages:
        raise BenchmarkError(f"{STAGE_ENV} names stage {target!r}, which this plan does not have")
    _rss_peak_reset()
    start_mb = _status_mb("VmRSS")  # the interpreter, its imports and the plan, before the stage
    wall, cpu, children = time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    if target == "report":
        from benchmark.report.build import publish_run

        where, _ = publish_run(plan, store, results_dir, folder, failed=False)
        disk = _size(where)
    else:
        stage = stages[target]
        parents = {p.id: store.load(p) for p in stage.parents.values()}
        store.force = True  # measured means computed: a finished stage is computed again, never timed as a reuse
        run_stage(stage, store, Context(threads=threads, progress=False), parents)
        disk = _size(store.path(stage))
    record = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": _cpu(resource.RUSAGE_SELF) - cpu + _cpu(resource.RUSAGE_CHILDREN) - children,
        "peak_mb": _status_mb(),
        "start_mb": start_mb,
        "child_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "disk_bytes": disk,
        "measured_at": _utc_minute(time.time()),
    }
    write_json(Path(out), record)
    return 0


# --------------------------------------------------------------------------- the driver


def run_args(folder: Path, work: Path, threads: int, doc_tokens: int, splade: bool = True) -> list[str]:
    """The ad-hoc run of one synthetic folder: BM25, and untrained ``scale-bert`` SPLADE unless ``splade`` is off."""
    folder, work = folder.resolve(), work.resolve()  # a bare relative folder would read as a dataset id
    return [
        "--datasets",
        f"{folder}@test",
        *(["--backbones", BACKBONE] if splade else []),
        "--runs-dir",
        str(work / "runs"),
        "--results-dir",
        str(work / ("results" if splade else "results-bm25")),
        "--threads",
        str(threads),
        "--no-progress",
        "--set",
        f"encode.max_doc_length={doc_tokens}",
    ]


def rehearse(
    documents: int,
    queries: int,
    work: Path,
    source: str,
    threads: int,
    doc_tokens: int,
    log: Any = print,
    splade: bool = True,
) -> list[Measurement]:
    """Every stage of one size, each in its own process; the measurements, in the order they ran
    (``splade`` off: BM25's stages and the shared ones only)."""
    from benchmark.data.synthetic_corpus import Recipe, write

    n_queries = min(queries, documents)
    folder = write(Recipe(documents, n_queries, source), work / "data", progress=False)
    args = run_args(folder, work, threads, doc_tokens, splade)
    report = {
        "id": "report",
        "kind": "report",
        "system": "" if splade else "bm25",
        "text": "tables, page, TREC exports",
    }
    rows = [*_plan(args), report]
    out: list[Measurement] = []
    for row in rows:
        result = (
            work / "measured" / f"{documents}-{row['id'] if row['id'] != 'report' or splade else 'report-bm25'}.json"
        )
        if not result.is_file():
            log(f"scale {documents:,} docs: {row['kind']} {row['system']} ({row['text']})")
            result.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                [sys.executable, "-m", "benchmark.run", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, **{STAGE_ENV: f"{row['id']}={result}"}),
            )
            if proc.returncode != 0 or not result.is_file():
                tail = " | ".join(proc.stdout.decode(errors="replace").strip().splitlines()[-3:])
                raise BenchmarkError(
                    f"scale rehearsal at {documents} documents: {row['kind']} {row['id']} failed "
                    f"(exit {proc.returncode}): {tail}"
                )
        got = json.loads(result.read_text())
        out.append(
            Measurement(
                documents,
                n_queries,
                row["kind"],
                row["system"],
                got["wall_s"],
                got["cpu_s"],
                got["peak_mb"],
                got["child_peak_mb"],
                got["disk_bytes"],
                _latency(work / "runs", row) if row["kind"] == "search" else None,
                got.get("start_mb"),
                # a record from before the field: its file is written once, atomically
                got.get("measured_at") or _utc_minute(result.stat().st_mtime),
            )
        )
    return out


def _latency(runs: Path, row: dict[str, str]) -> float | None:
    """ms per query inside Lucene's batch searches (the search record's ``lucene_s``: the search itself,
    apart from turning hits into Python objects), read from the finished stage's record."""
    meta = runs / row["kind"] / row["id"] / "config.json"
    if not meta.is_file():
        return None
    record = json.loads(meta.read_text()).get("record", {})
    if not record.get("lucene_s") or not record.get("queries"):
        return None
    return 1000 * float(record["lucene_s"]) / int(record["queries"])


def _plan(args: list[str]) -> list[dict[str, str]]:
    """The rehearsal's stages, parents first (``plan_rows``, printed by a dry run under ``STAGE_ENV=plan``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmark.run", *args, "--dry-run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, **{STAGE_ENV: "plan"}),
    )
    if proc.returncode != 0:
        raise BenchmarkError(f"planning the rehearsal failed: {proc.stdout.decode(errors='replace').strip()[-400:]}")
    rows: list[dict[str, str]] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return rows


def plan_rows(plan: Any) -> list[dict[str, str]]:
    """The plan's stages, parents first: id, kind, system (bm25, splade, or "" for the shared data stages)."""
    seen: dict[str, dict[str, str]] = {}

    def kinds_above(stage: Any) -> set[str]:
        return {stage.kind.name} | {k for p in stage.parents.values() for k in kinds_above(p)}

    def visit(stage: Any) -> None:
        if stage.id in seen:
            return
        for parent in stage.parents.values():
            visit(parent)
        above = kinds_above(stage)
        system = "splade" if "backbone" in above else "bm25" if "index" in above else ""
        seen[stage.id] = {"id": stage.id, "kind": stage.kind.name, "system": system, "text": stage.describe()}

    for c in plan.conditions:
        if c.evaluate is not None:
            visit(c.evaluate)
    return list(seen.values())


# --------------------------------------------------------------------------- fits, projections, files


def exponent(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of log(y) on log(x): y ∝ x^slope (None with fewer than two sizes)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def _key(m: Measurement) -> tuple[str, str]:
    return m.stage, m.system


def summarise(rows: list[Measurement]) -> list[dict[str, Any]]:
    """Per stage: the exponent of wall and CPU time in N (queries-bound stages scaled to one query count),
    peak memory at the two largest sizes, their ratio and the bytes added per document between them (what
    holding something per document would show: 16 bytes an id as a digest, 60 and more as a Python string),
    bytes on disk per document at the largest."""
    out = []
    for key in dict.fromkeys(_key(m) for m in rows):
        mine = sorted((m for m in rows if _key(m) == key), key=lambda m: m.documents)
        big, before = mine[-1], (mine[-2] if len(mine) > 1 else mine[-1])
        out.append(
            {
                "stage": key[0],
                "system": key[1],
                "own_mb": own_mb(big),
                "own_before_mb": own_mb(before),
                "time_exponent": exponent([(m.documents, m.cpu_s) for m in mine]),
                "wall_exponent": exponent([(m.documents, m.wall_s) for m in mine]),
                "largest": big.documents,
                "wall_s": big.wall_s,
                "cpu_s": big.cpu_s,
                "peak_mb": big.peak,
                "before": before.documents,
                "bytes_per_doc": big.bytes_per_doc,
                **_growth(before, big),
            }
        )
    return out


def _memory_pair(before: Measurement, big: Measurement) -> tuple[float, float, bool]:
    """The memory to compare between two sizes: what the stage added itself where both say (the process's
    start differs by plan: torch is imported where SPLADE is planned), else the whole peaks; and which."""
    own, own_before = own_mb(big), own_mb(before)
    if own is not None and own_before is not None:
        return own_before, own, True
    return before.peak, big.peak, False


def _growth(before: Measurement, big: Measurement) -> dict[str, float | None]:
    """The memory ratio from ``before`` to ``big`` and the bytes added per document between them (None
    where the sizes are the same)."""
    low, high, _ = _memory_pair(before, big)
    return {
        "memory_ratio": high / low if low > 0 else float("nan"),
        "added_per_doc": (high - low) * 2**20 / (big.documents - before.documents)
        if big.documents != before.documents
        else None,
    }


def own_mb(m: Measurement) -> float | None:
    """What the stage itself added: its process's peak above the resident set it started with, or its
    child's (the indexer JVM's) whole peak where larger; None for a measurement without its start."""
    if m.start_mb is None:
        return None
    return max(m.peak_mb - m.start_mb, m.child_peak_mb)


#: stages whose work is per query (their time at a target is scaled by its query count); the rest are per document
PER_QUERY = frozenset({"topics", "queries", "search", "evaluate", "report"})


def affine(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of y = a + b·x by least squares, both kept >= 0 (a stage's fixed cost and its cost per document)."""
    if len(points) < 2:
        x, y = points[0]
        return 0.0, y / x
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    b = max(0.0, sum((x - mx) * (y - my) for x, y in points) / den) if den else 0.0
    a = my - b * mx
    if a < 0:  # no negative fixed cost: a line through the origin instead
        a, b = 0.0, sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return a, b


def project(rows: list[Measurement], documents: int, queries: int) -> list[dict[str, Any]]:
    """Per stage at (``documents``, ``queries``): CPU core-hours from the affine fit of CPU time in N (times
    queries/measured queries for per-query stages), peak GB (the largest measured, grown by the measured ratio
    per decade where it grew), disk GB (bytes per document, or per query, at the largest size)."""
    out = []
    for key in dict.fromkeys(_key(m) for m in rows):
        mine = sorted((m for m in rows if _key(m) == key), key=lambda m: m.documents)
        big = mine[-1]
        per_query = key[0] in PER_QUERY
        q_scale = queries / big.queries if per_query else 1.0
        a, b = affine([(m.documents, m.cpu_s) for m in mine])
        # grown by what the stage itself added where both sizes say, else by the whole peak
        low, high, own = _memory_pair(mine[-2], mine[-1]) if len(mine) > 1 else (0.0, 0.0, False)
        growth = 1.0
        if len(mine) > 1 and low > 0 and high > low:
            per_decade = (high / low) ** (1 / math.log10(mine[-1].documents / mine[-2].documents))
            growth = per_decade ** max(0.0, math.log10(documents / big.documents))
        grown = big.peak - high + high * growth if own else big.peak * growth
        disk = big.disk_bytes / (big.queries if per_query else big.documents) * (queries if per_query else documents)
        out.append(
            {
                "stage": key[0],
                "system": key[1],
                "core_hours": (a + b * documents) * q_scale / 3600,
                "peak_gb": grown / 1024,
                "disk_gb": disk / 1e9,
            }
        )
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def write_outputs(
    rows: list[Measurement], out: Path, machine: str, notes: Sequence[str], command: str | None = None
) -> list[Path]:
    """scale.csv (every measurement), scale.md (the table, the fits, the projections) and scale.png."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "scale.csv", [{**asdict(m), "bytes_per_doc": round(m.bytes_per_doc, 1)} for m in rows], COLUMNS)
    summary = summarise(rows)
    sizes = sorted({m.documents for m in rows})
    lines = [
        "# The pipeline at growing corpus sizes",
        "",
        f"Machine: {machine}. Command: "
        f"`{command or 'python -m benchmark.perf scale --docs ' + ','.join(map(str, sizes))}`. "
        "Each stage ran in its own process; time is CPU seconds (the process and its children), "
        "memory is the peak resident set (the process's, or the indexer JVM's where larger).",
    ]
    starts = [m.start_mb for m in rows if m.start_mb is not None]
    if starts:
        lines[-1] += (
            f" A stage's process holds {min(starts):,.0f}–{max(starts):,.0f} MB before its stage starts (the "
            "interpreter, its imports and the plan; torch's where SPLADE is planned), inside its peak."
        )
    dates = sorted(m.measured_at for m in rows if m.measured_at)
    if dates:
        lines[-1] += (
            f" Measured {dates[0]} to {dates[-1]} UTC, each stage at each size once (its time is "
            "scale.csv's `measured_at`; a measurement is reused until its file under the work folder's "
            "`measured/` is deleted)."
        )
    lines.append("")
    lines += [
        "## Measured",
        "",
        "| stage | system | " + " | ".join(f"{n:,} docs: CPU s / peak MB" for n in sizes) + " |",
        "|---|---|" + "---:|" * len(sizes),
    ]
    for s in summary:
        cells = []
        for n in sizes:
            m = next((m for m in rows if m.documents == n and _key(m) == (s["stage"], s["system"])), None)
            cells.append("" if m is None else f"{m.cpu_s:,.1f} / {m.peak:,.0f}")
        lines.append(f"| {s['stage']} | {s['system'] or '-'} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Growth",
        "",
        "Exponent b of CPU time ∝ N^b (least squares over the sizes measured), peak memory at the largest size, "
        "the memory the stage itself added (its process's peak above what it started with, or the indexer JVM's "
        "peak) at the two largest sizes, their ratio and the bytes it added per document between them (a "
        "stage that held an id per document would add 16 bytes as a digest, 60 or more as a Python string), "
        "and bytes on disk per document at the largest.",
        "",
        "| stage | system | sizes | time exponent | wall exponent | peak MB | own MB | ratio | added B/doc | "
        "bytes/doc |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summary:
        own, before = s["own_mb"], s["own_before_mb"]
        added = f"{before:,.0f} → {own:,.0f}" if own is not None and before is not None else "-"
        span = f"{s['before']:,}–{s['largest']:,}" if s["before"] != s["largest"] else f"{s['largest']:,}"
        lines.append(
            f"| {s['stage']} | {s['system'] or '-'} | {span} | {_fmt(s['time_exponent'])} | "
            f"{_fmt(s['wall_exponent'])} | {s['peak_mb']:,.0f} | {added} | ×{s['memory_ratio']:.2f} | "
            f"{'-' if s['added_per_doc'] is None else format(s['added_per_doc'], ',.1f')} | {s['bytes_per_doc']:,.0f} |"
        )
    latency = [m for m in rows if m.lucene_ms_per_query is not None]
    if latency:
        systems = list(dict.fromkeys(m.system for m in latency))
        lines += [
            "",
            "## Query latency",
            "",
            "Milliseconds per query inside Lucene's batch search (one thread, top 1,000; the search stage's "
            "`lucene_s` over its queries), as the paper's efficiency columns report it; the search stage's CPU "
            "time above also counts turning each hit into a Python object.",
            "",
            "| documents | " + " | ".join(f"{'BM25' if s == 'bm25' else 'SPLADE impact'} ms/q" for s in systems) + " |",
            "|---:|" + "---:|" * len(systems),
        ]
        for n in sizes:
            cells = [
                next((f"{m.lucene_ms_per_query:.1f}" for m in latency if m.documents == n and m.system == s), "")
                for s in systems
            ]
            lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Projected",
        "",
        "CPU time per stage from a line fitted to the measured sizes (a fixed cost plus a cost per document, "
        "least squares), scaled by the target's queries for the per-query stages; peak memory as measured at "
        "the largest size, grown where it grew; disk from bytes per document (per query for runs and "
        "evaluations). The encode and queries stages ran on this CPU with a tiny encoder: on a GPU with a real "
        "one they are the GPU profile's (docs/compute-budget.md), so the CPU side is the rest: BM25's stages and one "
        "SPLADE model's index, search, evaluation and report. BEIR-13 is projected corpus by corpus (each query "
        "searches its own corpus) and summed; peak memory is the largest of its stages.",
        "",
        "| collection | documents | queries | CPU side: core-hours | of which index | of which search | peak GB | "
        "disk GB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    # the BM25-only report is the full report's BM25 half: counted once, in the full one where there is one
    both = any(m.stage == "report" and not m.system for m in rows)
    for name, parts in TARGETS:
        per_part = [
            [
                p
                for p in project(rows, docs, queries)
                if p["stage"] not in ("encode", "queries", "backbone")
                and not (both and p["stage"] == "report" and p["system"] == "bm25")
            ]
            for docs, queries in parts
        ]
        stages = [p for part in per_part for p in part]
        total = sum(p["core_hours"] for p in stages)
        index = sum(p["core_hours"] for p in stages if p["stage"] == "index")
        search = sum(p["core_hours"] for p in stages if p["stage"] == "search")
        docs, queries = sum(d for d, _ in parts), sum(q for _, q in parts)
        lines.append(
            f"| {name} | {docs:,} | {queries:,} | {total:.1f} | {index:.1f} | {search:.1f} | "
            f"{max(p['peak_gb'] for p in stages):.1f} | {sum(p['disk_gb'] for p in stages):.0f} |"
        )
    lines += ["", *notes, ""]
    write_text(out / "scale.md", "\n".join(lines))
    files = [out / "scale.csv", out / "scale.md"]
    if _plot(rows, out / "scale.png"):
        files.append(out / "scale.png")
    return files


def _plot(rows: list[Measurement], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key in dict.fromkeys(_key(m) for m in rows):
        mine = sorted((m for m in rows if _key(m) == key), key=lambda m: m.documents)
        label = " ".join(k for k in key if k)
        style = {"bm25": "-", "splade": "--"}.get(key[1], ":")  # more curves than colours: the system by its line
        ax_t.plot([m.documents for m in mine], [max(m.cpu_s, 1e-2) for m in mine], marker="o", ls=style, label=label)
        added = [(m.documents, own) for m in mine if (own := own_mb(m)) is not None]  # starts differ by plan
        ax_m.plot([d for d, _ in added], [max(v, 1.0) for _, v in added], marker="o", ls=style, label=label)
    sizes = sorted({m.documents for m in rows})
    if len(sizes) > 1:  # a line of slope 1 for reference
        ax_t.plot(sizes, [sizes[0] and 10 * s / sizes[0] for s in sizes], ls="--", color="grey", label="∝ N")
    for ax, title in ((ax_t, "CPU seconds"), (ax_m, "MB the stage added to its process (or its JVM's peak)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    ax_m.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.command_line import parser
    from benchmark.common.environment import machine_class
    from benchmark.model.synthetic import SCALE_DOC_TOKENS, SYNTHETIC
    from benchmark.perf.perf_cli import positive_ints

    p = parser("python -m benchmark.perf scale", __doc__.splitlines()[0])
    p.add_argument("--docs", default="10000,100000,1000000", help="comma-separated corpus sizes")
    p.add_argument("--queries", type=int, default=7000, help="queries per size (MS MARCO dev has 6,980)")
    p.add_argument("--source", default="beir/scifact", help="the collection whose vocabulary and lengths are drawn")
    p.add_argument("--work", type=Path, default=Path("runs/scale"), help="synthetic data, stages and measurements")
    p.add_argument("--out", type=Path, default=Path("results/perf"), help="where scale.{csv,md,png} go")
    p.add_argument("--threads", type=int, default=1, help="Lucene threads (1: single-thread latency)")
    p.add_argument(
        "--splade-max",
        type=int,
        default=None,
        help="the largest size with SPLADE's stages; larger sizes run BM25's and the shared ones (default: all)",
    )
    p.add_argument(
        "--doc-tokens",
        type=int,
        default=SCALE_DOC_TOKENS,
        help="tokens of each document the encoder reads (the backbone is calibrated for this)",
    )
    args = p.parse_args(argv)
    try:
        sizes = positive_ints(args.docs, "docs")
        positions = SYNTHETIC[BACKBONE].kwargs["max_position_embeddings"]
        if not 1 <= args.doc_tokens <= positions:  # before the synthetic corpus is written, not in its encode stage
            raise BenchmarkError(
                f"--doc-tokens {args.doc_tokens}: the rehearsal's backbone {BACKBONE} reads 1 to {positions} tokens "
                f"per document (max_position_embeddings); give --doc-tokens between 1 and {positions} "
                f"(default {SCALE_DOC_TOKENS})"
            )
        rows: list[Measurement] = []
        bm25_only = args.splade_max is not None and max(sizes) > args.splade_max
        for n in sorted(sizes):
            splade = args.splade_max is None or n <= args.splade_max
            rows += rehearse(n, args.queries, args.work, args.source, args.threads, args.doc_tokens, splade=splade)
            if splade and bm25_only:  # the BM25-only report at every size too, so that its curve has each point
                rows += [
                    m
                    for m in rehearse(
                        n, args.queries, args.work, args.source, args.threads, args.doc_tokens, splade=False
                    )
                    if m.stage == "report"
                ]
            command = f"python -m benchmark.perf scale --docs {args.docs}" + (
                f" --splade-max {args.splade_max}" if args.splade_max is not None else ""
            )
            write_outputs(rows, args.out, machine_class()[1], [], command)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'scale.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
