"""The search stage's cost beside its engine's: ``results/perf/search-stage.{md,csv}``.

Runs the stage's own loop (``benchmark.stages.search.write_run`` into ``atomic_write`` with the stage's buffer,
fsync included) on indexes that ``python -m benchmark.perf engines`` built, and divides the stage's process CPU
and wall by the engine's own time (``timing``): Lucene's is the wall inside Anserini's call, which searches,
prints the run and writes its file; PISA's is its native call (hits as arrays and id strings); ``exhaustive``'s
its compiled search. PISA and ``exhaustive`` print their run lines in compiled code (``writer_s``), shown apart
and also added to the engine's own time, as Anserini's printing is in Lucene's. Each run's scores are hashed:
exact engines give the same top-k scores (they may keep different documents among ties at the k-th).
"""

from __future__ import annotations

import hashlib
import os
import statistics
from pathlib import Path
from typing import Any

from benchmark.common.clock import add_time, clock
from benchmark.common.errors import BenchmarkError

COLUMNS = (
    "collection",
    "engine",
    "queries",
    "repeat",
    "engine_ms",
    "engine_cpu_ms",
    "writer_cpu_ms",
    "stage_cpu_ms",
    "stage_wall_ms",
    "cpu_over_engine",
    "wall_over_engine",
    "cpu_over_engine_writer",
    "wall_over_engine_writer",
    "scores_sha256",
)


def _indexes(items: list[str], specs: list[str]) -> dict[str, Path]:
    """``NAME=FOLDER`` → folder, each holding an index per engine asked for; one line for the first missing."""
    from benchmark.retrieval import engines

    found = {}
    for item in items:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise BenchmarkError(f"--index {item!r}: expected NAME=FOLDER, e.g. synthetic-100k=runs/engines/indexes/…")
        if name in found:
            raise BenchmarkError(f"--index {item}: {name!r} is given twice; give each collection one folder")
        for spec in specs:
            engine = engines.choose(spec).engine.name
            if not (Path(folder) / engine).is_dir():
                raise BenchmarkError(
                    f"--index {item}: no {engine} index in {Path(folder) / engine}; build it with python -m "
                    f"benchmark.perf engines (its --work folder's indexes/NAME), or leave {spec} out of --engines"
                )
        found[name] = Path(folder)
    if not found:
        raise BenchmarkError(
            "no --index given; pass --index NAME=FOLDER (a folder of python -m benchmark.perf engines)"
        )
    return found


def measure(
    name: str, folder: Path, queries: dict[str, dict[str, int]], spec: str, repeats: int, k: int, scratch: Path
) -> list[dict[str, Any]]:
    """One engine on one collection: a warm-up query, then ``repeats`` runs of the stage's loop, a row each."""
    from benchmark.common.atomic import atomic_write
    from benchmark.retrieval import engines
    from benchmark.stages.search import WRITE_BUFFER, impact_functions, write_run

    choice = engines.choose(spec)
    index = folder / choice.engine.name
    first = next(iter(queries))
    warm: dict[str, float] = {}
    search, written = impact_functions(index, choice.spec, k, 1, warm)
    with atomic_write(scratch / "warm.trec", buffering=WRITE_BUFFER) as fh:  # the JVM, the index, compiled code
        write_run(fh, {first: queries[first]}, search, written, bm25=False, remove_query=False)
    rows = []
    key = "lucene" if choice.engine.name == "lucene" else "engine"
    for repeat in range(1, repeats + 1):
        timing: dict[str, float] = {}
        search, written = impact_functions(index, choice.spec, k, 1, timing)
        run = scratch / f"{name}-{choice.engine.name}.trec"
        began = clock()
        with atomic_write(run, buffering=WRITE_BUFFER) as fh:
            write_run(fh, queries, search, written, bm25=False, remove_query=False)
        add_time(timing, began, "stage")
        wall, cpu = timing["stage_s"], timing["stage_cpu_s"]
        own, own_cpu = timing[f"{key}_s"], timing[f"{key}_cpu_s"]
        writer, writer_cpu = timing.get("writer_s"), timing.get("writer_cpu_s")
        n = len(queries)
        rows.append(
            {
                "collection": name,
                "engine": choice.spec,
                "queries": n,
                "repeat": repeat,
                "engine_ms": round(1000 * own / n, 4),
                "engine_cpu_ms": round(1000 * own_cpu / n, 4),
                "writer_cpu_ms": None if writer_cpu is None else round(1000 * writer_cpu / n, 4),
                "stage_cpu_ms": round(1000 * cpu / n, 4),
                "stage_wall_ms": round(1000 * wall / n, 4),
                "cpu_over_engine": round(cpu / own_cpu, 3),
                "wall_over_engine": round(wall / own, 3),
                "cpu_over_engine_writer": None if writer_cpu is None else round(cpu / (own_cpu + writer_cpu), 3),
                "wall_over_engine_writer": None if writer is None else round(wall / (own + writer), 3),
                "scores_sha256": scores_digest(run),
            }
        )
        print(" ".join(f"{c}={rows[-1][c]}" for c in COLUMNS), flush=True)
    return rows


def scores_digest(run: Path) -> str:
    """The first 16 hex digits of the SHA-256 of each line's query id and score, in the run's order: equal for
    runs with the same top-k scores (exact engines may keep different documents among ties at the k-th)."""
    digest = hashlib.sha256()
    with open(run, "rb") as fh:
        for line in fh:
            qid, _, _, _, score, _ = line.split(b" ")
            digest.update(qid + b" " + score + b"\n")
    return digest.hexdigest()[:16]


def _ratio(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return f"{min(present):.3f}–{max(present):.3f}" if present else ""


def write(rows: list[dict[str, Any]], out: Path, header: list[str]) -> None:
    """The table (a row per collection and engine, the repeats' ranges) and every repeat in the CSV."""
    from benchmark.common.atomic import csv_text, write_text

    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "search-stage.csv", csv_text(rows, list(COLUMNS)))
    lines = ["# The search stage's cost beside its engine's own time", "", *header, ""]
    lines += [
        "| collection | engine | engine ms/q | engine CPU ms/q | writer CPU ms/q | stage CPU ms/q | stage CPU / engine "
        "| stage wall / engine | CPU / (engine + writer) | wall / (engine + writer) | scores |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["collection"], row["engine"]), []).append(row)
    for (collection, engine), group in groups.items():
        writer = [r["writer_cpu_ms"] for r in group if r["writer_cpu_ms"] is not None]
        lines.append(
            f"| {collection} | {engine} | {statistics.median(r['engine_ms'] for r in group):.3f} "
            f"| {statistics.median(r['engine_cpu_ms'] for r in group):.3f} "
            f"| {f'{statistics.median(writer):.4f}' if writer else 'in engine' if engine == 'lucene' else ''} "
            f"| {statistics.median(r['stage_cpu_ms'] for r in group):.3f} "
            f"| {_ratio([r['cpu_over_engine'] for r in group])} | {_ratio([r['wall_over_engine'] for r in group])} "
            f"| {_ratio([r['cpu_over_engine_writer'] for r in group])} "
            f"| {_ratio([r['wall_over_engine_writer'] for r in group])} | `{group[-1]['scores_sha256']}` |"
        )
    write_text(out / "search-stage.md", "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    import platform
    import sys
    import tempfile
    from datetime import UTC, datetime

    from benchmark.common.command_line import parser
    from benchmark.common.environment import machine_class
    from benchmark.formats import vectors
    from benchmark.retrieval import engines, lucene

    p = parser("python -m benchmark.perf search-stage", __doc__.splitlines()[0])
    p.add_argument("--queries", type=Path, required=True, help="a queries stage's folder (its integer vectors)")
    p.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="a collection's indexes, a folder per engine (python -m benchmark.perf engines: WORK/indexes/NAME); "
        "repeatable",
    )
    p.add_argument("--engines", default="lucene,pisa:taat,exhaustive", help="engine specs, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="runs of the stage's loop per engine (default 3)")
    p.add_argument("--k", type=int, default=1000, help="the depth of every search (default 1000)")
    p.add_argument("--out", type=Path, default=Path("results/perf"), help="where search-stage.{md,csv} go")
    args = p.parse_args(argv)
    try:
        if args.repeat < 1:
            raise BenchmarkError(f"--repeat must be a positive integer, got {args.repeat}")
        deepest = min(lucene.MAX_K, lucene.MAX_EXACT_K)
        if not 1 <= args.k <= deepest:
            raise BenchmarkError(f"--k {args.k}: the depth must be from 1 to {deepest:,} (e.g. --k 1000)")
        specs = [c.spec for c in engines.choose_all([s for s in args.engines.split(",") if s.strip()])]
        for spec in specs:
            engines.require_exact(spec, "the search stage's measurement (its runs' scores compared)")
        folders = _indexes(args.index, specs)
        path = args.queries / vectors.QUERIES
        if not path.exists():
            raise BenchmarkError(f"--queries {args.queries}: no {vectors.QUERIES} there; pass a queries stage's folder")
        queries = vectors.read_vector_map(path)
        rows = []
        with tempfile.TemporaryDirectory(prefix="search-stage-") as tmp:
            for name, folder in folders.items():
                for spec in specs:
                    rows += measure(name, folder, queries, spec, args.repeat, args.k, Path(tmp))
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    load = os.getloadavg()
    header = [
        f"Machine: {machine_class()[1]} ({platform.machine()}, {os.cpu_count()} cores), one thread; load average "
        f"at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.",
        "Command: `python -m benchmark.perf search-stage "
        + " ".join(argv if argv is not None else sys.argv[1:])
        + "`.",
        "",
        f"{len(queries)} queries, top {args.k}, {args.repeat} runs each (medians, and the runs' ranges for the "
        "ratios). The stage's loop is `benchmark.stages.search.write_run` into `atomic_write` (a 1 MiB buffer, "
        "fsync). Engine: the time inside the engine's own call (Lucene: Anserini's, which also prints the run and "
        "writes its file; PISA: its native call; exhaustive: its compiled search), as wall and as the process's "
        "CPU in it (every thread: the JVM's compiler and collector threads count for Lucene). Writer: PISA's and "
        "exhaustive's run lines printed by compiled code (`_run_text`), after the engine's call. Stage CPU is the "
        "process's over the whole loop. Scores: the first 16 hex digits of the SHA-256 of each line's query id "
        "and score, equal for the same top-k scores.",
    ]
    write(rows, args.out, header)
    print(f"[perf] wrote {args.out / 'search-stage.md'} and {args.out / 'search-stage.csv'}")
    return 0
