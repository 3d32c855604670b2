"""``pisa``: PISA through ``pyterrier-pisa``'s native module, exact dynamic pruning on the same integer impacts.

The index is built with ``toks_indexer(scale=1.0)``, so every impact goes in unchanged (no requantisation),
and queried with PISA's ``quantized`` scorer with the query weights as given: a hit's score is the integer
dot product over every query term, summed in float32 (exact below 2**24, as Lucene's). Each query algorithm
is an operating point, and all are exact: three prune safely (document at a time), and ``taat`` scores every
posting term at a time into one accumulator per document, which wins where pruning skips little (dense
queries, many documents). No JVM is started: only the C++ module is called.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmark.common.clock import clock
from benchmark.formats.trec_run import Hits
from benchmark.retrieval.engines import Engine, Point, add_time, count_documents, ranked, register


def term(token: str) -> str:
    """A token as PISA stores and looks it up: its UTF-8 bytes in hex. ``pyterrier-pisa`` lowercases a
    pretokenised query's terms (not the indexed ones), so a cased vocabulary's ``ĠX`` found ``Ġx``'s postings;
    hex digits are lowercase already and hold every token apart, punctuation and spaces included."""
    return token.encode("utf-8").hex()


def _documents(shards: Path) -> Iterator[dict[str, Any]]:
    from benchmark.formats import vectors

    for row in vectors.read_collection(shards):
        yield {"docno": row.id, "toks": {term(t): w for t, w in row.vector.items()}}


#: PISA's uncompressed postings and forward index: read once, to write the compressed postings and block
#: maxima (``_context``), and never by a search; 4/5 of the folder (1,645 MB with them, 354 without, at 1M
#: synthetic documents)
UNCOMPRESSED = ("inv.docs", "inv.freqs", "inv.sizes", "fwd.documents", "fwd.terms")


@lru_cache(maxsize=4)
def _context(index: str) -> Any:
    """The prepared retrieval context of an index (compressed postings and block maxima), once per process."""
    import pyterrier_pisa

    retrieve = pyterrier_pisa.PisaRetrieve(
        pyterrier_pisa.PisaIndex(index, stemmer="none", stops="none"), scorer="quantized", toks_scale=1.0
    )
    return retrieve._ctxt


class Pisa(Engine):
    name = "pisa"
    package = "pyterrier-pisa"
    module = "pyterrier_pisa"
    # 1: terms in hex (``term``): PISA had lowercased a cased vocabulary's query terms; 2: the uncompressed
    # inputs removed once compressed (``UNCOMPRESSED``)
    revision = 2
    points = (
        Point("maxscore", True, {"algorithm": "maxscore"}),
        Point("block-max-maxscore", True, {"algorithm": "block_max_maxscore"}),
        Point("block-max-wand", True, {"algorithm": "block_max_wand"}),
        # exhaustive term at a time; not ``ranked_or_taat_lazy``, which drops the query weights
        Point("taat", True, {"algorithm": "ranked_or_taat"}),
    )

    def build(self, shards: Path, index: Path, threads: int) -> dict[str, int]:
        import pyterrier_pisa

        pisa = pyterrier_pisa.PisaIndex(str(index), threads=threads, stemmer="none", stops="none")
        pisa.toks_indexer(scale=1.0).index(_documents(shards))
        _context.cache_clear()
        _context(str(index))  # compresses the postings and stores block maxima now, not in the first search
        _context.cache_clear()
        for name in UNCOMPRESSED:
            (Path(index) / name).unlink(missing_ok=True)
        _context(str(index))  # loaded again from what is kept: an index missing a file fails here, not later
        documents, terms = count_documents(shards)
        return {"documents": documents, "unique_terms": terms}

    def _retrieve(
        self, index: Path, queries: dict[str, dict[str, int]], k: int, point: Point, threads: int, timing: Any
    ) -> tuple[list[str], Any, Any, Any]:
        """PISA's own output, grouped by query in the order given (its threads finish queries in any order):
        each hit's query position, document id and float32 score, as arrays, each query's best first."""
        import numpy as np
        from pyterrier_pisa import _pisathon

        qids = list(queries)
        given = [(i, {term(t): float(w) for t, w in queries[q].items()}) for i, q in enumerate(qids)]
        size = len(qids) * k
        qidx, docnos = np.empty(size, dtype=np.int32), np.empty(size, dtype=object)
        ranks, scores = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.float32)
        context = _context(str(index))
        if point.knobs["algorithm"] == "ranked_or_taat":
            threads = 1  # its query holds one accumulator, which PISA's threads would share (a data race)
        began = clock()
        n = _pisathon.retrieve(
            context,
            point.knobs["algorithm"],
            [item for item in given if item[1]],  # an empty query matches nothing
            k=k,
            threads=threads,
            query_weighted=1,
            pretokenised=True,
            result_qidxs=qidx,
            result_docnos=docnos,
            result_ranks=ranks,
            result_scores=scores,
        )
        add_time(timing, began)
        qidx, docnos, scores = qidx[:n], docnos[:n], scores[:n]
        if n and (qidx[1:] < qidx[:-1]).any():  # one thread keeps the queries' order: no copy of 250k ids
            order = np.argsort(qidx, kind="stable")
            qidx, docnos, scores = qidx[order], docnos[order], scores[order]
        return qids, qidx, docnos, scores

    def search(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> Hits:
        qids, qidx, docnos, scores = self._retrieve(index, queries, k, point, threads, timing)
        found: dict[str, list[tuple[str, float]]] = {q: [] for q in qids}
        for i, docno, score in zip(qidx.tolist(), docnos.tolist(), scores.tolist(), strict=True):
            found[qids[i]].append((docno, score))
        return {q: ranked(hits) for q, hits in found.items()}

    def run_lines(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> dict[str, list[str]] | None:
        """``search``'s hits printed by compiled code (``_run_text.by_score``) from PISA's own output: the ids it
        hands over as strings joined into one UTF-8 buffer a batch, each query's ties put in id order (as
        ``ranked`` puts them; PISA's order is its internal number) and its lines printed as ``format_run`` prints
        an integer score (a float32 past 2**24 is an integer too). No tuple, sort key or string a hit."""
        import numpy as np

        try:
            from benchmark.retrieval.engines import _run_text
        except ImportError:  # numba (the `engines` extra) absent: the search stage prints ``search``'s hits
            return None
        qids, qidx, docnos, scores = self._retrieve(index, queries, k, point, threads, timing)
        began = clock()
        names = docnos.tolist()
        first, last = np.empty(len(names), np.int64), np.empty(len(names), np.int64)
        ids = _run_text.padded("\0".join(names).encode())
        if names and not _run_text.separated(ids, len(names), 0, first, last):  # an id holds "\0"
            ids = _run_text.padded(b"".join(encoded := [name.encode() for name in names]))
            np.cumsum([len(e) for e in encoded], out=last)
            first[0], first[1:] = 0, last[:-1]
        printed = np.rint(scores).astype(np.int64)
        bounds = np.searchsorted(qidx, np.arange(len(qids) + 1)).tolist()
        printer = _run_text.Printer()
        lines: dict[str, list[str]] = {}
        for i, q in enumerate(qids):
            a, b = bounds[i], bounds[i + 1]
            id_bytes = int(last[b - 1] - first[a]) if b > a else 0
            lines[q] = printer.lines(q, b - a, id_bytes, _run_text.by_score, printed[a:b], first[a:b], last[a:b], ids)
        add_time(timing, began, "writer")
        return lines


register(Pisa())
