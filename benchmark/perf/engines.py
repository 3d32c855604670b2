"""The efficiency–effectiveness frontier of the search engines: every engine and operating point on the same
integer impacts, in one run on one machine.

Per collection and point: ms per query on one thread (p50, p99; each query its own call, the engine's own
time), index build CPU seconds (this process and its children: Lucene's indexer JVM), index bytes, nDCG@10 and
RR@10 where the collection has judgments, and recall of the exact top-10 and top-1000 (Lucene's exact run is
the reference; an exact engine must reach 1.0 at both, ties counted as kept). Collections: a real encode
stage's shards and queries stage's vectors (``--real``), and synthetic impact vectors of a trained model's
sparsity (``--synthetic``): documents and queries drawn term by term from a real encode stage's document
frequencies, lengths and weights, so pruning meets the skew it would meet; a length multiplier draws denser
documents, since density decides how much pruning can skip (× 5 drawn from NFCorpus: FLOPS 4.3 against 1.5, a
repeated common term kept once). A source may also be the scale rehearsal's untrained encoder at 10k documents
(``--real`` with its synthetic folder as ``PATH@test``), the density its search hours were projected from.
Each row states its collection's FLOPS, so the settings are told apart.
"""

from __future__ import annotations

import csv
import hashlib
import json
import resource
import time
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.formats.trec_run import Hits
from benchmark.retrieval import engines

MEASURES = ("nDCG@10", "RR@10")
COLUMNS = (
    "collection",
    "documents",
    "queries",
    "FLOPS",
    "engine",
    "point",
    "exact",
    "ms_p50",
    "ms_p99",
    "ms_mean",
    "build_cpu_s",
    "index_bytes",
    "nDCG@10",
    "RR@10",
    "delta_nDCG@10",
    "delta_RR@10",
    "recall_exact@10",
    "recall_exact@1000",
)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _lucene_one_by_one(index: Path, queries: dict[str, dict[str, int]], k: int) -> tuple[Hits, list[float]]:
    """Lucene's exact run, a query per call on one open searcher: seconds per call (the ScoredDoc array
    returned, its hits read into Python after the clock stops)."""
    from benchmark.retrieval import lucene

    lucene.start_jvm()
    from jnius import autoclass

    longest = max((len(v) for v in queries.values()), default=0)
    if longest > 1024:
        searcher_class = autoclass("org.apache.lucene.search.IndexSearcher")
        searcher_class.setMaxClauseCount(max(longest, searcher_class.getMaxClauseCount()))
    integer, hashmap = autoclass("java.lang.Integer"), autoclass("java.util.HashMap")
    searcher = autoclass("io.anserini.search.SimpleImpactSearcher")(str(index))
    hits: Hits = {}
    seconds: list[float] = []
    try:
        for timed in (False, True):  # the first pass warms the JVM's JIT
            for qid, vector in queries.items():
                query = hashmap()
                for token, weight in vector.items():
                    query.put(token, integer(int(weight)))
                began = time.perf_counter()
                found = searcher.search(query, int(k))
                if timed:
                    seconds.append(time.perf_counter() - began)
                hits[qid] = engines.ranked([(h.docid, float(h.score)) for h in found])
    finally:
        searcher.close()
    return hits, seconds


def _one_by_one(
    choice: engines.Choice, index: Path, queries: dict[str, dict[str, int]], k: int
) -> tuple[Hits, list[float]]:
    hits: Hits = {}
    seconds = []
    for qid, vector in queries.items():
        timing: dict[str, float] = {}
        hits.update(choice.engine.search(index, {qid: vector}, k, choice.point, 1, timing))
        seconds.append(timing.get("engine_s", 0.0))
    return hits, seconds


def collection_flops(shards: Path, queries: dict[str, dict[str, int]]) -> tuple[int, float]:
    """The number of documents and the FLOPS (``benchmark.retrieval.flops``) of the collection as searched (its
    documents' and the queries' non-zero terms), in one pass over the shards."""
    from benchmark.formats import vectors
    from benchmark.retrieval.flops import flops

    df: dict[str, int] = {}
    documents = 0
    for shard in sorted(Path(shards).glob(vectors.SHARD_GLOB)):
        for row in vectors.read_vectors(shard):
            documents += 1
            for term, weight in row.vector.items():
                if weight > 0:
                    df[term] = df.get(term, 0) + 1
    qf: dict[str, int] = {}
    for vector in queries.values():
        for term, weight in vector.items():
            if weight > 0:
                qf[term] = qf.get(term, 0) + 1
    shared = sorted(set(df) & set(qf))
    return documents, flops([df[t] for t in shared], documents, [qf[t] for t in shared], len(queries))


def _quantile(values: Sequence[float], q: float) -> float:
    import numpy as np

    return float(np.quantile(np.asarray(values), q)) if values else float("nan")


def _effectiveness(hits: Hits, qrels: list[Any] | None) -> dict[str, float]:
    """The mean over the searched queries that have judgments: a judged query left out by ``--max-queries``
    is not a query the engine missed (ir_measures would count it at 0)."""
    if not qrels:
        return {}
    import ir_measures

    judged = [qrel for qrel in qrels if qrel.query_id in hits]
    if not judged:
        return {}
    run = [ir_measures.ScoredDoc(q, d, s) for q, ranked in hits.items() for d, s in ranked if d != q]
    found = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in MEASURES], judged, run)
    return {str(m): float(v) for m, v in found.items()}


def measure(
    name: str,
    shards: Path,
    queries: dict[str, dict[str, int]],
    qrels: list[Any] | None,
    specs: Sequence[str],
    work: Path,
    k: int = 1000,
) -> list[dict[str, Any]]:
    """One collection's rows: each engine's index built once, each operating point searched query by query."""
    import shutil

    from benchmark.common.disk import disk_usage

    documents, density = collection_flops(shards, queries)
    built = work / "indexes" / name  # apart from the drawn documents, which outlive a run
    shutil.rmtree(built, ignore_errors=True)  # every index built in this run, none reused
    lucene_index = built / "lucene"
    began = _cpu()
    engines.choose("lucene").engine.build(shards, lucene_index, 1)
    builds = {"lucene": (_cpu() - began, disk_usage(lucene_index))}
    reference, seconds = _lucene_one_by_one(lucene_index, queries, k)
    rows = []
    base = _effectiveness(reference, qrels)
    for spec in specs:
        choice = engines.choose(spec)
        if choice.engine.name == "lucene":
            hits, took = reference, seconds
        else:
            folder = built / choice.engine.name
            if choice.engine.name not in builds:
                began = _cpu()
                choice.engine.build(shards, folder, 1)
                builds[choice.engine.name] = (_cpu() - began, disk_usage(folder))
            _one_by_one(choice, folder, queries, k)  # warm: the index loaded, caches filled, as Lucene's
            hits, took = _one_by_one(choice, folder, queries, k)
        scores = _effectiveness(hits, qrels)
        row: dict[str, Any] = {
            "collection": name,
            "documents": documents,
            "queries": len(queries),
            "FLOPS": round(density, 2),
            "engine": choice.engine.name,
            "point": choice.point.name,
            "exact": choice.point.exact,
            "ms_p50": round(1000 * _quantile(took, 0.5), 3),
            "ms_p99": round(1000 * _quantile(took, 0.99), 3),
            "ms_mean": round(1000 * sum(took) / max(len(took), 1), 3),
            "build_cpu_s": round(builds[choice.engine.name][0], 2),
            "index_bytes": builds[choice.engine.name][1],
            "recall_exact@10": round(engines.recall_of_exact(reference, hits, 10), 4),
            "recall_exact@1000": round(engines.recall_of_exact(reference, hits, k), 4) if k >= 1000 else None,
        }
        for m in MEASURES:
            if m in scores:
                row[m] = round(scores[m], 4)
                row[f"delta_{m}"] = round(scores[m] - base[m], 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def synthetic(
    source: Path, queries: dict[str, dict[str, int]], n: int, out: Path, seed: int = 0, length: float = 1.0
) -> tuple[Path, dict[str, dict[str, int]]]:
    """``n`` documents of a trained model's sparsity: each draws as many terms as a real document has (a real
    length drawn at random, × ``length``) by the real document frequencies (with replacement, a repeat kept
    once, so a document can come out a little shorter), weights from the real weights; the real queries
    search them."""
    import numpy as np

    from benchmark.formats import vectors

    rows = [
        row.vector for shard in sorted(Path(source).glob(vectors.SHARD_GLOB)) for row in vectors.read_vectors(shard)
    ]
    df: dict[str, int] = {}
    for vector in rows:
        for term in vector:
            df[term] = df.get(term, 0) + 1
    terms = np.array(list(df))
    cdf = np.cumsum(np.array(list(df.values()), dtype=np.float64))
    cdf /= cdf[-1]
    lengths = np.maximum(np.rint(np.array([len(v) for v in rows if v]) * length), 1).astype(np.int64)
    weights = np.array([w for v in rows for w in v.values()])
    rng = np.random.default_rng(seed)
    recipe = {"source": str(Path(source).resolve()), "documents": n, "seed": seed, "length": length}
    # a folder per draw: two sources drawn at one size must not overwrite each other's documents
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    folder = out / "drawn" / (f"synthetic-{n}-{key}" if length == 1.0 else f"synthetic-{n}-x{length:g}-{key}")
    folder.mkdir(parents=True, exist_ok=True)
    shard, drawn_from = vectors.shard_path(folder, 0), folder / "drawn.json"
    if not shard.exists() or not drawn_from.exists() or json.loads(drawn_from.read_text()) != recipe:
        # drawn again unless this very draw was finished there (drawn.json is written last)
        drawn_from.unlink(missing_ok=True)

        def draw() -> Any:
            for i in range(n):
                picked = np.unique(
                    np.minimum(np.searchsorted(cdf, rng.random(int(rng.choice(lengths)))), len(terms) - 1)
                )
                drawn = rng.choice(weights, size=len(picked)).tolist()
                yield vectors.Vector(f"s{i}", dict(zip(terms[picked].tolist(), drawn, strict=True)))

        vectors.write_doc_vectors(shard, draw())
        drawn_from.write_text(json.dumps(recipe))
    return folder, queries


def stem(k: int) -> str:
    """``engines`` for the top-1000 frontier, ``engines-top{k}`` for another depth (its own files)."""
    return "engines" if k == 1000 else f"engines-top{k}"


def write(rows: list[dict[str, Any]], out: Path, header: list[str], k: int = 1000) -> None:
    from benchmark.common.atomic import atomic_write

    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / f"{stem(k)}.csv") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# Search engines: the efficiency–effectiveness frontier", "", *header, ""]
    lines.append(
        "| collection | docs | FLOPS | engine:point | exact | ms/q p50 | p99 | build CPU s | index MB | nDCG@10 (Δ) "
        "| RR@10 (Δ) | R@10 of exact | R@1000 of exact |"
    )
    lines.append("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        eff = [f"{r[m]:.4f} ({r[f'delta_{m}']:+.4f})" if m in r else "–" for m in MEASURES]
        lines.append(
            f"| {r['collection']} | {r['documents']:,} | {r['FLOPS']:.2f} | {r['engine']}:{r['point']} | "
            f"{'exact' if r['exact'] else 'approximate'} | {r['ms_p50']:.2f} | {r['ms_p99']:.2f} | "
            f"{r['build_cpu_s']:.1f} | {r['index_bytes'] / 1e6:.1f} | {eff[0]} | {eff[1]} | "
            f"{r['recall_exact@10']:.4f} | "
            + ("–" if r["recall_exact@1000"] is None else f"{r['recall_exact@1000']:.4f}")
            + " |"
        )
    with atomic_write(out / f"{stem(k)}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    plot(rows, out / f"{stem(k)}.png", k)


def plot(rows: list[dict[str, Any]], path: Path, k: int = 1000) -> None:
    """Latency (p50, log scale) against recall of the exact top-k at the searched depth (top-10 below 1000,
    where no top-1000 was searched), one panel per collection, one line per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    depth = 1000 if k >= 1000 else 10

    names = list(dict.fromkeys(r["collection"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for engine in dict.fromkeys(r["engine"] for r in rows if r["collection"] == name):
            mine = sorted(
                (r for r in rows if r["collection"] == name and r["engine"] == engine), key=lambda r: r["ms_p50"]
            )
            ax.plot([r["ms_p50"] for r in mine], [r[f"recall_exact@{depth}"] for r in mine], marker="o", label=engine)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # a panel within one decade labels its minor ticks, overlapping
        ax.set_title(name)
        ax.set_xlabel("ms per query, p50, one thread")
        ax.set_ylabel(f"recall of the exact top-{depth}")
        ax.legend()
    fig.tight_layout()
    from benchmark.common.atomic import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)


def _length(item: str, more: list[str]) -> float:
    """The length multiplier of ``--synthetic NAME=SOURCE,DOCS[,LENGTH]``: a positive number, 1 when left out."""
    import math

    try:
        length = float(more[0]) if more else 1.0
    except ValueError:
        length = math.nan
    if len(more) > 1 or not (math.isfinite(length) and length > 0):
        raise BenchmarkError(
            f"--synthetic {item}: LENGTH must be one positive number (e.g. {item.split(',')[0]},"
            f"{item.split(',')[1] if ',' in item else 'DOCS'},5 draws documents 5 times a real one's length)"
        )
    return length


def _qrels(dataset: str) -> list[Any]:
    """The judgments of any dataset the pipeline reads: an ir_datasets id, or a local folder as ``PATH@split``
    (the scale rehearsal's synthetic collection)."""
    import ir_measures

    from benchmark.data import sources
    from benchmark.data.datasets import validate_dataset

    problem = validate_dataset(dataset)  # the one check the pipeline runs on a dataset before any work
    if problem:
        raise BenchmarkError(problem)
    return [ir_measures.Qrel(q.query_id, q.doc_id, q.relevance) for q in sources.parse(dataset).read(docs=False)[2]]


def main(argv: list[str] | None = None) -> int:
    import os
    import platform
    from datetime import datetime

    from benchmark.common.command_line import parser
    from benchmark.common.environment import machine_class
    from benchmark.formats import vectors

    p = parser("python -m benchmark.perf engines", __doc__.splitlines()[0])
    p.add_argument(
        "--real",
        action="append",
        default=[],
        metavar="NAME=ENCODE_DIR,QUERIES_DIR,DATASET",
        help="a collection: an encode stage's folder, a queries stage's folder, and the dataset of its qrels (an "
        "ir_datasets id, or a local folder as PATH@split)",
    )
    p.add_argument(
        "--synthetic",
        action="append",
        default=[],
        metavar="NAME=SOURCE_NAME,DOCS[,LENGTH]",
        help="synthetic vectors drawn from a --real one, each document LENGTH times a real one's terms (default "
        "1: a trained model's sparsity); repeatable (default: none)",
    )
    p.add_argument("--engines", default="all", help="engine specs, comma-separated, or all (every point)")
    p.add_argument(
        "--engines-at",
        action="append",
        default=[],
        metavar="NAME=SPECS",
        help="other engine specs for one collection, e.g. synthetic-1m=lucene,pisa:maxscore where an engine's "
        "build would not fit the time; repeatable (default: --engines everywhere)",
    )
    p.add_argument("--max-queries", type=int, default=None, help="the first N queries of each collection")
    p.add_argument(
        "--k",
        type=int,
        default=1000,
        help="the depth of every search, Lucene's reference too (default 1000: results/perf/engines.*; another "
        "depth writes engines-top{k}.*, e.g. 10 for the recall of the exact top-10 at a top-10 search's cost)",
    )
    p.add_argument("--work", type=Path, default=Path("runs/engines"), help="the indexes built")
    p.add_argument("--out", type=Path, default=Path("results/perf"), help="where engines.{md,csv,png} go")
    args = p.parse_args(argv)
    try:
        if not 10 <= args.k <= 1000:
            raise BenchmarkError(f"--k {args.k}: the depth must be from 10 to 1000 (e.g. --k 10 or the default 1000)")
        names = engines.names()
        specs = (
            [f"{n}:{pt.name}" for n in names for pt in engines.ENGINES[n].points]
            if args.engines == "all"
            else args.engines.split(",")
        )
        engines.choose_all(specs)
        at: dict[str, list[str]] = {}
        for item in args.engines_at:
            name, _, rest = item.partition("=")
            at[name] = rest.split(",")
            engines.choose_all(at[name])
        real = [item.partition("=") for item in args.real]
        drawn: list[tuple[str, str, int, float]] = []
        for item in args.synthetic:  # every spec checked before any collection is read
            name, _, rest = item.partition("=")
            source, docs, *more = rest.split(",")
            if source not in {r[0] for r in real}:
                raise BenchmarkError(
                    f"--synthetic {item}: no --real collection named {source!r}; valid: "
                    f"{', '.join(r[0] for r in real) or 'none (pass --real NAME=…)'}"
                )
            drawn.append((name, source, int(docs), _length(item, more)))
        unknown = sorted(set(at) - {r[0] for r in real} - {d[0] for d in drawn})
        if unknown:
            raise BenchmarkError(
                f"--engines-at {unknown[0]}: no collection of that name; pass one of --real/--synthetic"
            )
        collections: dict[str, tuple[Path, dict[str, dict[str, int]], list[Any] | None]] = {}
        for name, _, rest in real:
            encode_dir, queries_dir, dataset = rest.split(",")
            queries = vectors.read_vector_map(Path(queries_dir) / vectors.QUERIES)
            if args.max_queries:
                queries = dict(list(queries.items())[: args.max_queries])
            collections[name] = (Path(encode_dir) / vectors.SHARDS, queries, _qrels(dataset))
        rows = []
        for name, (shards, queries, qrels) in collections.items():
            rows += measure(name, shards, queries, qrels, at.get(name, specs), args.work, args.k)
        for name, source, docs, length in drawn:
            shards, queries, _ = collections[source]
            folder, queries = synthetic(shards, queries, docs, args.work, length=length)
            rows += measure(name, folder, queries, None, at.get(name, specs), args.work, args.k)
    except BenchmarkError as exc:
        print(f"error: {exc}")
        return 2
    load = os.getloadavg()
    header = [
        f"Machine: {machine_class()[1]} ({platform.machine()}, {os.cpu_count()} cores), one "
        f"thread per engine; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared machine: "
        "timings ±30 %).",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.",
        "Command: `python -m benchmark.perf engines "
        + " ".join(argv if argv is not None else __import__("sys").argv[1:])
        + "`.",
        f"Reference: Lucene's exact impact search (Anserini `SimpleImpactSearcher`), top-{args.k}; every engine "
        f"searched to depth {args.k}; ms per query is each "
        "query's own call (Lucene: the ScoredDoc array returned; PISA and Seismic: their native call), the index "
        "loaded and warmed. Recall of the exact top-k counts a hit tied with the exact k-th score as kept.",
    ]
    write(rows, args.out, header, args.k)
    return 0
