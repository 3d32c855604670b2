"""The search stage: top-k retrieval from an index into a TREC run file (``run.trec``).

BM25 searches the topics' query texts; impact search the queries stage's pre-encoded vectors (scores:
exact integer dot products over every query term, ``benchmark.retrieval.lucene.impact_search``), and records the
queries whose scores passed float32's exact integers, and FLOPS from the encode stage's document
frequencies (a declared parent). With
``remove_query`` (on for BEIR, as Pyserini's ``--remove-query`` in 2CR) a hit whose document id
equals the query id is dropped after retrieving k, so recall at k matches 2CR.

``engine`` picks the impact search's backend (``benchmark.retrieval.engines``, ``NAME[:POINT]``; Lucene by
default): its index stage is built by the same engine, and the float32 and exact-integer checks apply to
every engine's hits alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from benchmark.formats import vectors
from benchmark.formats.lucene_index import index_path
from benchmark.formats.query_texts import QUERIES, read_queries
from benchmark.formats.trec_run import RUN, Hits, format_run
from benchmark.stages.records import EncodeRecord, IndexRecord, QueriesRecord, SearchRecord
from benchmark.stages.store import Context, Inputs, StageKind, added_field

#: queries per Lucene batch: the run file grows a batch at a time, and the JVM's heap holds one batch's hits
BATCH = 250
#: the run file's write buffer: a query's lines (47 KB at k = 1,000) gathered into writes of a MiB, which cost
#: the kernel about half as much a byte (ext4: 0.008 against 0.015 ms a query's 47 KB)
WRITE_BUFFER = 1 << 20


def copyable(lines: Mapping[str, list[str]], remove_query: bool, unsure: Set[str] = frozenset()) -> dict[str, str]:
    """The queries whose run lines (``lucene.impact_run_lines``, ``lucene.bm25_run_lines`` or an engine's
    ``run_lines``) go to the run as written, as text: those with hits, every score printed as ``format_run``
    prints it (a top score below ``FLOAT32_EXACT``: an impact sum is then an integer, with no rescoring; and
    not ``unsure``, BM25's ``tie_printed``) and, with ``remove_query``, no hit on the query's own id. The rest
    are read into hits."""
    from benchmark.retrieval.lucene import FLOAT32_EXACT

    out = {}
    for q, block in lines.items():
        if not block or q in unsure or _top_score(block[0]) >= FLOAT32_EXACT:
            continue
        text = "".join(block)
        if not (remove_query and f" Q0 {q} " in text):
            out[q] = text
    return out


def _top_score(text: str) -> float:
    """The score on the first of the lines in ``text`` (a query's 1,000 lines may come as one string: only the
    first is split)."""
    end = text.find("\n")
    return float(text[: end if end >= 0 else len(text)].split(" ", 5)[4])


def tie_printed(lines: Mapping[str, list[str]]) -> set[str]:
    """The queries of ``lucene.bm25_run_lines`` with a line whose score Java may have printed from a tie
    (``lucene.half_up_tie``), where ``format_run`` could print it otherwise."""
    from benchmark.retrieval.lucene import half_up_tie

    return {q for q, block in lines.items() if any(map(half_up_tie, block))}


class Search(StageKind["Search.Config", SearchRecord]):
    name = "search"
    VERSION = 2
    Record = SearchRecord
    parents = ("index", "queries")
    optional_parents = ("docs",)  # impact search: the encode stage, for FLOPS
    light_parents = ("docs",)  # its record and df.npy: shards dropped by --keep indexed are not needed
    counted = (("queries", "queries", "searched"),)
    sources = (
        "benchmark.formats.lucene_index",
        "benchmark.formats.query_texts",
        "benchmark.formats.trec_run",
        "benchmark.formats.vectors",
        "benchmark.retrieval.engines",
        "benchmark.retrieval.engines._run_text",
        "benchmark.retrieval.engines._taat",
        "benchmark.retrieval.engines.exhaustive",
        "benchmark.retrieval.engines.lucene",
        "benchmark.retrieval.engines.pisa",
        "benchmark.retrieval.engines.seismic",
        "benchmark.retrieval.flops",
        "benchmark.retrieval.lucene",
        "benchmark.stages.search",
    )

    @dataclass(frozen=True)
    class Config:
        k: int = 1000
        k1: float | None = None  # BM25 only
        b: float | None = None
        remove_query: bool = False
        # impact search: scores past 2**24 (Lucene's float32 rounds them) rescored to their exact integers
        # from the encode shards; the planner sets it for every impact search (BM25 searches keep their ids)
        exact: bool = added_field(False)
        # impact search: the engine and operating point (benchmark.retrieval.engines); Lucene's keeps its id
        engine: str = added_field("lucene")

    @classmethod
    def describe(cls, config: Config) -> str:
        bm25 = f" k1={config.k1} b={config.b}" if config.k1 is not None else ""
        return (
            f"top-{config.k}{bm25}"
            + (f" with {config.engine}" if config.engine != "lucene" else "")
            + (", self-hits removed" if config.remove_query else "")
            + (", exact past 2^24" if config.exact else "")
        )

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> SearchRecord:
        from benchmark.common import kill_points
        from benchmark.common.atomic import atomic_write
        from benchmark.retrieval import lucene

        index_type = inputs.record("index", IndexRecord).type
        index = index_path(inputs.path("index"))
        queries: dict[str, Any]
        timing: dict[str, float] = {}
        search: Callable[[dict[str, Any]], Hits]
        written: Callable[[dict[str, Any]], dict[str, list[str]] | None]
        if index_type == "bm25":
            queries = dict(read_queries(Path(inputs.path("queries")) / QUERIES))
            # a plan always sets both; left out, Pyserini's defaults
            bm25 = {k: v for k, v in {"k1": config.k1, "b": config.b}.items() if v is not None}

            def bm25_search(batch: dict[str, Any]) -> Hits:
                return lucene.bm25_search(index, batch, k=config.k, threads=ctx.threads, timing=timing, **bm25)

            def bm25_written(batch: dict[str, Any]) -> dict[str, list[str]] | None:
                # Anserini writes the run (no hit through pyjnius); texts that are not one TSV line each
                # go through the in-memory search
                if lucene.bm25_run_writer_fits(batch):
                    return lucene.bm25_run_lines(index, batch, k=config.k, threads=ctx.threads, timing=timing, **bm25)
                return None

            search, written = bm25_search, bm25_written
        else:
            queries = vectors.read_vector_map(Path(inputs.path("queries")) / vectors.QUERIES)
            search, written = impact_functions(index, config.engine, config.k, ctx.threads, timing)
        shards = (
            sorted((Path(inputs.path("docs")) / vectors.SHARDS).glob(vectors.SHARD_GLOB))
            if config.exact and "docs" in inputs
            else []
        )
        # the run is written a batch of queries at a time: an MS MARCO run (7M hits) is never held whole
        with atomic_write(out / RUN, buffering=WRITE_BUFFER) as fh:
            counts = write_run(
                fh, queries, search, written, bm25=index_type == "bm25", remove_query=config.remove_query, shards=shards
            )
        kill_points.point("search:written")
        record: dict[str, Any] = {
            "type": index_type,
            "queries": len(queries),
            "k": config.k,
            "removed_self_hits": counts.removed,
            "queries_without_hits": counts.without_hits,
            "lucene_s": round(timing.get("lucene_s", 0.0), 3),
        }
        if config.engine != "lucene" and index_type != "bm25":
            from benchmark.retrieval import engines

            choice = engines.choose(config.engine)
            record.update(
                {
                    "engine": choice.name,
                    "exact": choice.point.exact,
                    "engine_s": round(timing.get("engine_s", 0.0), 3),
                }
            )
        if index_type != "bm25":
            record["queries_past_float32"] = counts.past
            record["queries_rescored_exactly"] = counts.rescored if config.exact and "docs" in inputs else 0
        if "docs" in inputs:
            from benchmark.retrieval.flops import flops

            docs, query_rec = inputs.record("docs", EncodeRecord), inputs.record("queries", QueriesRecord)
            record.update(
                {
                    "doc_nnz": docs.doc_nnz,
                    "query_nnz": query_rec.query_nnz,
                    "FLOPS": flops(
                        vectors.read_counts(Path(inputs.path("docs")) / vectors.DF),
                        docs.documents,
                        vectors.read_counts(Path(inputs.path("queries")) / vectors.QF),
                        query_rec.queries,
                    ),
                }
            )
        return SearchRecord.from_json(record)


def impact_functions(
    index: Path, engine: str, k: int, threads: int, timing: dict[str, float]
) -> tuple[Callable[[dict[str, Any]], Hits], Callable[[dict[str, Any]], dict[str, list[str]] | None]]:
    """An impact search's (``search``, ``written``) for ``write_run``: the engine's hits, and its own run lines
    where it has them (None: the batch goes through ``search``); both add the engine's seconds to ``timing``."""
    from benchmark.retrieval import lucene

    if engine != "lucene":
        from benchmark.retrieval import engines

        choice = engines.choose(engine)
        lucene.check_k(k)

        def search(batch: dict[str, Any]) -> Hits:
            return choice.engine.search(index, batch, k, choice.point, threads, timing)

        def written(batch: dict[str, Any]) -> dict[str, list[str]] | None:
            # the engine's own output printed as lines (no hit tuple, no ranked list), where it can
            return choice.engine.run_lines(index, batch, k, choice.point, threads, timing)

        return search, written

    def lucene_search(batch: dict[str, Any]) -> Hits:
        try:
            return lucene.impact_search(index, batch, k=k, threads=threads, timing=timing)
        except Exception as exc:
            raise lucene.lost_queries(exc, batch) from exc

    def lucene_written(batch: dict[str, Any]) -> dict[str, list[str]] | None:
        # Anserini writes the run itself (no hit through pyjnius); a collapsed model's dense batch, too large
        # as pretokenized text, goes through the in-memory search: the same hits either way
        if lucene.run_writer_fits(batch):
            return lucene.impact_run_lines(index, batch, k=k, threads=threads, timing=timing)
        return None

    return lucene_search, lucene_written


@dataclass
class RunCounts:
    """What ``write_run`` saw: self-hits dropped, queries left without hits, queries with a score past float32's
    exact integers, and of those the ones rescored exactly."""

    removed: int = 0
    without_hits: int = 0
    past: int = 0
    rescored: int = 0


def write_run(
    fh: IO[str],
    queries: dict[str, Any],
    search: Callable[[dict[str, Any]], Hits],
    written: Callable[[dict[str, Any]], dict[str, list[str]] | None],
    bm25: bool,
    remove_query: bool,
    shards: Sequence[Path] = (),
) -> RunCounts:
    """The stage's run, a batch of ``BATCH`` queries at a time, into ``fh``: the engine's own lines (``written``)
    copied unread where nothing would change them, the rest read into hits (or ``search``'s hits where it has no
    lines) and printed by ``format_run``. ``shards``: the encode shards, to rescore sums past 2**24 exactly.
    ``python -m benchmark.perf search-stage`` times this same loop against the engine's own time."""
    from benchmark.retrieval import lucene

    counts = RunCounts()
    qids = list(queries)
    for start in range(0, len(qids), BATCH):
        batch = {q: queries[q] for q in qids[start : start + BATCH]}
        lines = written(batch)
        if lines is None:
            hits = search(batch)
        else:  # a query's lines copied unread where nothing below would change them
            # BM25: a query with a line printed from a tie is searched again for its float scores
            again = tie_printed(lines) if bm25 else set()
            copied = copyable(lines, remove_query, again)
            hits = search({q: batch[q] for q in batch if q in again}) if again else {}
            integer = not bm25
            read = (q for q in batch if q not in copied and q not in again)
            hits.update({q: [lucene.run_line_hit(ln, integer) for ln in "".join(lines[q]).splitlines()] for q in read})
        if not bm25:
            counts.past += len(lucene.past_float32(hits))
            if shards:  # sums past 2**24 come back rounded: exact integers again
                # (shards dropped by --keep indexed: the rounded scores stay, counted as past float32)
                rows = (row for shard in shards for row in vectors.read_vectors(shard))
                counts.rescored += len(lucene.rescore_exact(hits, queries, rows))
        if remove_query:
            for qid, ranked in hits.items():
                kept = [(d, s) for d, s in ranked if d != qid]
                counts.removed += len(ranked) - len(kept)
                hits[qid] = kept
        counts.without_hits += sum(1 for v in hits.values() if not v)
        if lines is None:
            fh.write(format_run(hits))
        else:  # in the batch's order, as format_run writes it; a write a query, not one joined string
            # a batch (a fresh 12 MB string and its 12 MB encoding, page faults and all, at k = 1000)
            for q in batch:
                fh.write(copied[q] if q in copied else format_run({q: hits[q]}))
    return counts
