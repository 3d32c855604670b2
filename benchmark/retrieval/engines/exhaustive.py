"""``exhaustive``: the harness's own exact engine, every posting scored term at a time, in ``numba``.

Not a published engine (PISA, BMP and Seismic are), and labelled so: it prunes nothing, and is fast where
pruning skips little (the frontier's MaxScore floor: 0.37-0.50 of the postings must be read at 1M synthetic
documents even by a MaxScore search told the final threshold).
Documents are split into ranges of 2**16 by their number, each term's postings into the same ranges, so one
range's accumulators (2**16 unsigned integers) stay in the core's own cache while every query term adds into
them; a range's scores above the running k-th score are kept, and the accumulators cleared in the same pass.
Scores are exact integer dot products (int64 where a query's largest possible score could pass 32 bits),
printed at their float32 value as Lucene and PISA print theirs (exact below 2**24).

The index is plain arrays (``numpy.save``), read by memory map: each posting's document number within its range
(uint16) and impact (the smallest unsigned type that holds the largest), and per term the start of each
range's postings. It is built a range at a time (memory for one range's postings), and a query's run lines are
written by compiled code (no Python string a hit).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from benchmark.common import atomic
from benchmark.common.clock import clock
from benchmark.common.errors import BenchmarkError
from benchmark.formats.trec_run import Hits
from benchmark.retrieval.engines import Engine, Point, add_time, register

RANGE_BITS = 16  # 2**16 accumulators of 4 bytes: 256 KiB, inside a core's L2 on every CPU class here
FORMAT = 1  # the index files' layout, in meta.json: an index of another layout is refused, not misread
META = "meta.json"
ARRAYS = ("starts", "local", "impacts", "largest", "idrank")
_SCRATCH = threading.local()


class Index(NamedTuple):
    """An opened index: its arrays by memory map, its terms' numbers and its documents' ids in memory."""

    terms: dict[str, int]
    docids: Any  # object array of the ids, by document number
    starts: Any  # int64, terms × ranges + 1: term t's postings in range r are starts[t·R + r] : starts[t·R + r + 1]
    local: Any  # uint16: each posting's document number within its range
    impacts: Any  # each posting's impact
    largest: Any  # int64 per term: its largest impact (a query's bound on its scores)
    idrank: Any  # int32 per document: its id's place in sorted order (ties go by id, as ``ranked`` puts them)
    documents: int
    ranges: int


class _Range:
    """One range's postings as they are read, in NumPy chunks (4 bytes a field, not a Python int's 28)."""

    CHUNK = 1 << 22

    def __init__(self) -> None:
        self.terms: list[int] = []
        self.impacts: list[int] = []
        self.docs: list[int] = []
        self.chunks: list[tuple[Any, Any, Any]] = []

    def add(self, number: int, kept: list[tuple[int, int]]) -> None:
        import numpy as np

        for t, w in kept:
            self.terms.append(t)
            self.impacts.append(w)
        self.docs.extend([number] * len(kept))
        if len(self.terms) > self.CHUNK:
            self.chunks.append(
                (
                    np.array(self.terms, dtype=np.int32),
                    np.array(self.impacts, dtype=np.uint32),
                    np.array(self.docs, dtype=np.int32),
                )
            )
            self.terms, self.impacts, self.docs = [], [], []

    def sorted(self, n_terms: int) -> tuple[Any, Any, Any]:
        """The range's postings by term (stable, so by document within a term): (each term's count, each
        posting's document within the range, its impact)."""
        import numpy as np

        parts = [
            *self.chunks,
            (np.array(self.terms, np.int32), np.array(self.impacts, np.uint32), np.array(self.docs, np.int32)),
        ]
        term_of, impact, doc = (np.concatenate([c[i] for c in parts]) for i in range(3))
        order = np.argsort(term_of, kind="stable")
        local = (doc[order] & ((1 << RANGE_BITS) - 1)).astype(np.uint16)
        return np.bincount(term_of, minlength=n_terms), local, impact[order]


def build_arrays(shards: Path, folder: Path) -> dict[str, int]:
    """Read the shards once, a range of 2**16 documents at a time: each range's postings sorted by term and
    appended to scratch files, then copied to their places (by term, then by range) in the index's arrays. Memory
    holds one range's postings, not the collection's. A document with no positive impact is left out, as Lucene
    leaves it out of an impact index (it scores 0 for every query)."""
    import numpy as np

    from benchmark.formats import vectors
    from benchmark.retrieval.engines import _taat

    folder.mkdir(parents=True, exist_ok=True)
    terms: dict[str, int] = {}
    docids: list[str] = []
    counts: list[Any] = []  # per range: each term's postings (terms seen so far)
    largest = np.zeros(0, dtype=np.int64)
    scratch = {"local": folder / ".local.scratch", "impacts": folder / ".impacts.scratch"}
    current = _Range()
    try:
        with open(scratch["local"], "wb") as local_out, open(scratch["impacts"], "wb") as impacts_out:

            def flush() -> None:
                nonlocal largest, current
                count, local, impact = current.sorted(len(terms))
                local_out.write(local.tobytes())
                impacts_out.write(impact.tobytes())
                counts.append(count)
                if len(largest) < len(terms):
                    largest = np.concatenate([largest, np.zeros(len(terms) - len(largest), np.int64)])
                present = np.flatnonzero(count)
                if len(present):  # each present term's postings are one run: its largest impact in one reduction
                    firsts = np.concatenate([[0], np.cumsum(count)[:-1]])[present]
                    np.maximum.at(largest, present, np.maximum.reduceat(impact, firsts).astype(np.int64))
                current = _Range()

            for docid, vector in vectors.read_collection(shards):
                kept = [(t, w) for t, w in vector.items() if w > 0]
                if kept and max(w for _, w in kept) >= 1 << 32:
                    raise BenchmarkError(
                        f"document {docid!r} has an impact of {max(w for _, w in kept):,}, past the 32 bits this "
                        "engine (and Lucene's impact index, 31 bits) can hold; quantise the vectors to smaller integers"
                    )
                if not kept:
                    continue
                number = len(docids)
                if number and number % (1 << RANGE_BITS) == 0:
                    flush()
                docids.append(docid)
                current.add(number, [(terms.setdefault(t, len(terms)), w) for t, w in kept])
            flush()
        n_terms, n_docs, ranges = len(terms), len(docids), len(counts)
        by_range = np.zeros((ranges, n_terms), dtype=np.int64)
        for r, count in enumerate(counts):
            by_range[r, : len(count)] = count
        starts = np.zeros(n_terms * ranges + 1, dtype=np.int64)  # by term, then by range
        np.cumsum(by_range.T.ravel(), out=starts[1:])
        total = int(starts[-1])
        top = int(largest.max()) if n_terms else 0
        kind = np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32
        for name, stored, dtype in (("local", np.uint16, np.uint16), ("impacts", np.uint32, kind)):
            # the scratch file by memory map (an empty one cannot be mapped)
            source = np.memmap(scratch[name], dtype=stored, mode="r", shape=(total,)) if total else np.zeros(0, stored)
            with atomic.atomic_path(folder / f"{name}.npy") as tmp:
                out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(total,))
                _taat.scatter(np.asarray(source), by_range, starts, np.asarray(out))
                out.flush()
                del out
            del source
    finally:
        for path in scratch.values():
            path.unlink(missing_ok=True)
    atomic.save_npy(folder / "starts.npy", starts)
    atomic.save_npy(folder / "largest.npy", largest)
    atomic.write_json(folder / "terms.json", list(terms))
    atomic.write_json(folder / "docids.json", docids)
    # each document's place among the ids in sorted order: ties go by id without comparing strings at search
    idrank = np.empty(n_docs, dtype=np.int32)
    idrank[sorted(range(n_docs), key=docids.__getitem__)] = np.arange(n_docs, dtype=np.int32)
    atomic.save_npy(folder / "idrank.npy", idrank)
    meta = {"format": FORMAT, "range_bits": RANGE_BITS, "documents": n_docs, "terms": n_terms, "ranges": ranges}
    atomic.write_json(folder / META, meta)  # written last: a folder without it is no index
    return {"documents": n_docs, "unique_terms": n_terms}


@lru_cache(maxsize=4)
def _open(index: str) -> Index:
    import numpy as np

    folder = Path(index)
    meta = json.loads((folder / META).read_text())
    if meta.get("format") != FORMAT or meta.get("range_bits") != RANGE_BITS:
        raise BenchmarkError(
            f"index {folder} has layout {meta.get('format')}/{meta.get('range_bits')}, this engine reads "
            f"{FORMAT}/{RANGE_BITS}; build it again (delete the folder, the index stage rebuilds it)"
        )
    arrays = {n: np.asarray(np.load(folder / f"{n}.npy", mmap_mode="r")) for n in ARRAYS}  # plain arrays for numba
    terms = {t: i for i, t in enumerate(json.loads((folder / "terms.json").read_text()))}
    docids = np.array(json.loads((folder / "docids.json").read_text()), dtype=object)
    return Index(terms, docids, documents=meta["documents"], ranges=meta["ranges"], **arrays)


class Exhaustive(Engine):
    name = "exhaustive"
    package = "numba"
    module = "numba"
    points = (Point("taat", True, {}),)

    def build(self, shards: Path, index: Path, threads: int) -> dict[str, int]:
        _open.cache_clear()
        _id_bytes.cache_clear()
        return build_arrays(shards, Path(index))

    def _search_one(self, opened: Index, vector: dict[str, int], k: int, scratch: tuple[Any, Any, Any, Any]) -> Any:
        """One query's k best as (printed scores, document numbers), ranked: the engine's own work, on its clock."""
        import numpy as np

        from benchmark.retrieval.engines import _taat

        narrow, wide, scores, numbers = scratch
        found = [(opened.terms[t], w) for t, w in vector.items() if w > 0 and t in opened.terms]
        terms = np.array([t for t, _ in found], dtype=np.int64)
        weights = np.array([w for _, w in found], dtype=np.int64)
        bound = int((weights * opened.largest[terms]).sum()) if found else 0
        n = _taat.top_k(
            terms,
            weights,
            opened.starts,
            opened.local,
            opened.impacts,
            opened.ranges,
            opened.documents,
            k,
            narrow if bound < 1 << 32 else wide,  # a score that could pass 32 bits is summed in int64
            scores,
            numbers,
        )
        return _taat.ranked(scores[:n], numbers[:n], opened.idrank)

    @staticmethod
    def _scratch(k: int) -> tuple[Any, Any, Any, Any]:
        """This thread's accumulators (32- and 64-bit, all zero between queries) and candidates, room for 4k:
        a selection keeps the k best of 4k (a few per query, as the k-th score climbs); made once per thread
        and depth, not per call (fresh pages would be faulted in on every query)."""
        import numpy as np

        room = max(4 * k, 256)
        cached = getattr(_SCRATCH, "arrays", None)
        if cached is None or cached[2].shape[0] != room:
            width = 1 << RANGE_BITS
            cached = (
                np.zeros(width, dtype=np.uint32),
                np.zeros(width, dtype=np.int64),
                np.empty(room, dtype=np.int64),
                np.empty(room, dtype=np.int64),
            )
            _SCRATCH.arrays = cached
        return cached

    def _retrieve(
        self, index: Path, queries: dict[str, dict[str, int]], k: int, threads: int, timing: Any
    ) -> tuple[Index, list[Any]]:
        opened = _open(str(index))
        qids = list(queries)
        self._search_one(opened, {}, k, self._scratch(k))  # compiled (or loaded from numba's cache) off the clock
        began = clock()
        if threads <= 1 or len(qids) < 2:
            scratch = self._scratch(k)
            found = [self._search_one(opened, queries[q], k, scratch) for q in qids]
        else:
            parts = [qids[i::threads] for i in range(threads)]

            def work(part: list[str]) -> list[Any]:
                scratch = self._scratch(k)
                return [self._search_one(opened, queries[q], k, scratch) for q in part]

            with ThreadPoolExecutor(threads) as pool:
                done = list(pool.map(work, parts))
            by_query = {
                q: keys for part, out in zip(parts, done, strict=True) for q, keys in zip(part, out, strict=True)
            }
            found = [by_query[q] for q in qids]
        add_time(timing, began)
        return opened, found

    def search(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> Hits:
        opened, found = self._retrieve(index, queries, k, threads, timing)  # ranked, ties by document id
        return {
            q: list(zip(opened.docids[numbers].tolist(), printed.astype(float).tolist(), strict=True))
            for q, (printed, numbers) in zip(queries, found, strict=True)
        }

    def run_lines(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> dict[str, list[str]]:
        """The lines ``format_run`` prints from ``search``'s hits, each query's written in one compiled call
        (``_run_text.numbered``) as one string: no hit tuple, no string per line."""
        import numpy as np

        from benchmark.retrieval.engines import _run_text

        _, found = self._retrieve(index, queries, k, threads, timing)
        began = clock()
        ids, starts, longest = _id_bytes(str(index))
        printer, touched = _run_text.Printer(), np.zeros(1, dtype=np.int64)
        lines = {
            q: printer.lines(
                q, len(numbers), len(numbers) * longest, _run_text.numbered, printed, numbers, ids, starts, touched
            )
            for q, (printed, numbers) in zip(queries, found, strict=True)
        }
        add_time(timing, began, "writer")
        return lines


@lru_cache(maxsize=4)
def _id_bytes(index: str) -> tuple[Any, Any, int]:
    """The documents' ids in UTF-8, end to end (with ``_run_text.PAD`` bytes of room), each one's start (and the
    end), and the longest's length: what the compiled run writer copies from."""
    import numpy as np

    from benchmark.retrieval.engines import _run_text

    encoded = [d.encode() for d in _open(index).docids]
    starts = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=starts[1:])
    return _run_text.padded(b"".join(encoded)), starts, max(map(len, encoded), default=0)


register(Exhaustive())
