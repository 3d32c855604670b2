"""The efficiency–effectiveness frontier of the search engines: every engine and operating point on the same
integer impacts, in one run on one machine.

Per collection and point: ms per query on one thread (p50, p99; each query its own call, the engine's own
time), index build CPU seconds (this process and its children: Lucene's indexer JVM), index bytes, nDCG@10 and
RR@10 where the collection has judgments, and recall of the exact top-10 and top-1000 (Lucene's exact run is
the reference; an exact engine must reach 1.0 at both, ties counted as kept). Collections: a real encode
stage's shards and queries stage's vectors (``--real``), and synthetic impact vectors of a trained model's
sparsity (``--synthetic``): documents drawn term by term from a real encode stage's document frequencies,
lengths and weights, searched by its real queries; a drawn term's weight is any term's real weight (``pooled``) or
one of its own (``term``: a trained model's link of a term to its weights, whose per-term maxima MaxScore prunes
by); a length multiplier draws denser documents, since density decides how much pruning can skip (× 5 drawn
from NFCorpus: FLOPS 4.3 against 1.5, a repeated common term kept once). A source may also be the scale
rehearsal's untrained encoder at 10k documents (``--real`` with its synthetic folder as ``PATH@test``), the
density its search hours were projected from.
Each row states its collection's FLOPS, so the settings are told apart, and its MaxScore floor
(``maxscore_floor``): the share of the queries' postings that MaxScore must read even when it knows the final
threshold, a bound on what MaxScore can skip on the collection (WAND's pivots may skip within a list).
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
    "maxscore_floor",
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


def scan(shards: Path) -> tuple[int, dict[str, int], dict[str, int]]:
    """One pass over a collection's shards: its number of documents, and each term's document frequency and
    largest impact (its non-zero postings)."""
    from benchmark.formats import vectors

    df: dict[str, int] = {}
    top: dict[str, int] = {}
    documents = 0
    for row in vectors.read_collection(shards):
        documents += 1
        for term, weight in row.vector.items():
            if weight > 0:
                df[term] = df.get(term, 0) + 1
                if weight > top.get(term, 0):
                    top[term] = weight
    return documents, df, top


def collection_flops(
    shards: Path, queries: dict[str, dict[str, int]], scanned: tuple[int, dict[str, int], Any] | None = None
) -> tuple[int, float]:
    """The number of documents and the FLOPS (``benchmark.retrieval.flops``) of the collection as searched (its
    documents' and the queries' non-zero terms); ``scanned`` is ``scan(shards)`` where it was read already."""
    from benchmark.retrieval.flops import flops

    documents, df, _ = scanned or scan(shards)
    qf: dict[str, int] = {}
    for vector in queries.values():
        for term, weight in vector.items():
            if weight > 0:
                qf[term] = qf.get(term, 0) + 1
    shared = sorted(set(df) & set(qf))
    return documents, flops([df[t] for t in shared], documents, [qf[t] for t in shared], len(queries))


def maxscore_floor(
    queries: dict[str, dict[str, int]], exact: Hits, k: int, df: dict[str, int], top: dict[str, int]
) -> float:
    """The share of the queries' postings that a MaxScore search must read even when it knows each query's
    final threshold θ (the exact k-th score) before its first posting: a term's bound is its query weight × its
    largest impact, and the lightest lists whose bounds sum to at most θ can only be probed, the rest read
    whole. A lower bound on what MaxScore reads (a real search starts at θ = 0 and also probes); a
    query with fewer than k hits has θ = 0 and every list read. Block maxima (``block-max-*``) bound tighter,
    so this is not their floor."""
    import numpy as np

    read = total = 0
    for qid, vector in queries.items():
        terms = [t for t, w in vector.items() if w > 0 and t in df]
        if not terms:
            continue
        found = exact.get(qid, [])
        theta = found[k - 1][1] if len(found) >= k else 0.0
        bound = np.array([vector[t] * top[t] for t in terms], dtype=np.float64)
        size = np.array([df[t] for t in terms], dtype=np.int64)
        order = np.argsort(bound, kind="stable")
        probed = int(np.searchsorted(np.cumsum(bound[order]), theta, side="right"))
        read += int(size[order][probed:].sum())
        total += int(size.sum())
    return read / total if total else 1.0


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

    scanned = scan(shards)
    documents, density = collection_flops(shards, queries, scanned)
    built = work / "indexes" / name  # apart from the drawn documents, which outlive a run
    shutil.rmtree(built, ignore_errors=True)  # every index built in this run, none reused
    lucene_index = built / "lucene"
    began = _cpu()
    engines.choose("lucene").engine.build(shards, lucene_index, 1)
    builds = {"lucene": (_cpu() - began, disk_usage(lucene_index))}
    reference, seconds = _lucene_one_by_one(lucene_index, queries, k)
    floor = maxscore_floor(queries, reference, k, scanned[1], scanned[2])
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
            "maxscore_floor": round(floor, 3),
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


WEIGHTS = ("pooled", "term")  # how a drawn term gets its weight (``synthetic``)


def synthetic(
    source: Path,
    queries: dict[str, dict[str, int]],
    n: int,
    out: Path,
    seed: int = 0,
    length: float = 1.0,
    weights: str = "pooled",
) -> tuple[Path, dict[str, dict[str, int]]]:
    """``n`` documents of a trained model's sparsity: each draws as many terms as a real document has (a real
    length drawn at random, × ``length``) by the real document frequencies (with replacement, a repeat kept
    once, so a document can come out a little shorter); the real queries search them.

    A drawn term's weight is one of the real weights: of any term (``pooled``, which gives a frequent term the
    largest weights of rare ones, so every posting list has about the same maximum and pruning meets none of a
    model's skew), or of that same term (``term``: each term keeps its own weights, as a trained model gives them;
    the weights as a whole are distributed as in ``pooled``)."""
    import numpy as np

    from benchmark.formats import vectors

    if weights not in WEIGHTS:
        raise BenchmarkError(f"synthetic weights {weights!r}: valid: {', '.join(WEIGHTS)}")
    rows = [row.vector for row in vectors.read_collection(source)]
    by_term: dict[str, list[int]] = {}
    for vector in rows:
        for term, weight in vector.items():
            by_term.setdefault(term, []).append(weight)
    terms = np.array(list(by_term))
    df = np.array([len(w) for w in by_term.values()], dtype=np.int64)
    cdf = np.cumsum(df.astype(np.float64))
    cdf /= cdf[-1]
    lengths = np.maximum(np.rint(np.array([len(v) for v in rows if v]) * length), 1).astype(np.int64)
    pooled = np.array([w for v in rows for w in v.values()])  # in document order, as earlier draws chose from
    flat = np.array([w for ws in by_term.values() for w in ws])  # each term's weights, in ``terms`` order
    start = np.concatenate([[0], np.cumsum(df)[:-1]])
    rng = np.random.default_rng(seed)
    recipe: dict[str, Any] = {"source": str(Path(source).resolve()), "documents": n, "seed": seed, "length": length}
    if weights != "pooled":  # a pooled draw keeps its earlier recipe, so its folder is found again
        recipe["weights"] = weights
    # a folder per draw: two sources drawn at one size must not overwrite each other's documents
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    stretch = "" if length == 1.0 else f"-x{length:g}"
    folder = out / "drawn" / f"synthetic-{n}{stretch}{'' if weights == 'pooled' else '-' + weights}-{key}"
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
                if weights == "pooled":
                    drawn = rng.choice(pooled, size=len(picked))
                else:  # a uniform index into each picked term's own weights
                    own = np.minimum(rng.random(len(picked)) * df[picked], df[picked] - 1).astype(np.int64)
                    drawn = flat[start[picked] + own]
                yield vectors.Vector(f"s{i}", dict(zip(terms[picked].tolist(), drawn.tolist(), strict=True)))

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
        "| collection | docs | FLOPS | MaxScore floor | engine:point | exact | ms/q p50 | p99 | build CPU s "
        "| index MB | nDCG@10 (Δ) | RR@10 (Δ) | R@10 of exact | R@1000 of exact |"
    )
    lines.append("|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        eff = [f"{r[m]:.4f} ({r[f'delta_{m}']:+.4f})" if m in r else "–" for m in MEASURES]
        lines.append(
            f"| {r['collection']} | {r['documents']:,} | {r['FLOPS']:.2f} | {r['maxscore_floor']:.3f} | "
            f"{r['engine']}:{r['point']} | "
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
    where no top-1000 was searched), one panel per collection (four to a row), one line and colour per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    depth = 1000 if k >= 1000 else 10

    names = list(dict.fromkeys(r["collection"] for r in rows))
    # one colour per engine in every panel (a panel without an engine would otherwise shift the others')
    colours = {e: f"C{i}" for i, e in enumerate(dict.fromkeys(r["engine"] for r in rows))}
    across = min(4, len(names))
    down = -(-len(names) // across)
    fig, axes = plt.subplots(down, across, figsize=(5 * across, 4 * down), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        for engine in dict.fromkeys(r["engine"] for r in rows if r["collection"] == name):
            mine = sorted(
                (r for r in rows if r["collection"] == name and r["engine"] == engine), key=lambda r: r["ms_p50"]
            )
            xs, ys = [r["ms_p50"] for r in mine], [r[f"recall_exact@{depth}"] for r in mine]
            ax.plot(xs, ys, marker="o", label=engine, color=colours[engine])
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


def _draw_options(item: str, more: list[str]) -> tuple[float, str]:
    """The length multiplier and the weights of ``--synthetic NAME=SOURCE,DOCS[,LENGTH][,WEIGHTS]``: a positive
    number, 1 when left out, and one of ``WEIGHTS``, ``pooled`` when left out."""
    import math

    weights = more.pop() if more and more[-1] in WEIGHTS else "pooled"
    try:
        length = float(more[0]) if more else 1.0
    except ValueError:
        length = math.nan
    if len(more) > 1 or not (math.isfinite(length) and length > 0):
        raise BenchmarkError(
            f"--synthetic {item}: LENGTH must be one positive number and WEIGHTS one of {', '.join(WEIGHTS)} (e.g. "
            f"{item.split(',')[0]},{item.split(',')[1] if ',' in item else 'DOCS'},5,term draws documents 5 times a "
            "real one's length, each term with its own weights)"
        )
    return length, weights


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
        metavar="NAME=SOURCE_NAME,DOCS[,LENGTH][,WEIGHTS]",
        help="synthetic vectors drawn from a --real one, each document LENGTH times a real one's terms (default "
        "1: a trained model's sparsity), each term's weight one of any term's real weights (WEIGHTS pooled, the "
        "default) or of its own (term); repeatable (default: none)",
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
        drawn: list[tuple[str, str, int, float, str]] = []
        for item in args.synthetic:  # every spec checked before any collection is read
            name, _, rest = item.partition("=")
            source, docs, *more = rest.split(",")
            if source not in {r[0] for r in real}:
                raise BenchmarkError(
                    f"--synthetic {item}: no --real collection named {source!r}; valid: "
                    f"{', '.join(r[0] for r in real) or 'none (pass --real NAME=…)'}"
                )
            drawn.append((name, source, int(docs), *_draw_options(item, more)))
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
        for name, source, docs, length, weights in drawn:
            shards, queries, _ = collections[source]
            folder, queries = synthetic(shards, queries, docs, args.work, length=length, weights=weights)
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
        "query's own call (Lucene: the ScoredDoc array returned; PISA and Seismic: their native call; exhaustive: "
        "its compiled call, with the query's arrays made from its terms), the index "
        "loaded and warmed. Recall of the exact top-k counts a hit tied with the exact k-th score as kept.",
    ]
    write(rows, args.out, header, args.k)
    return 0
