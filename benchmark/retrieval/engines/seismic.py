"""``seismic``: Seismic (``pyseismic-lsr``), approximate: posting lists cut at build time and blocks skipped by
their summaries at query time. Its query knobs (``query_cut``, the query terms kept, heaviest first, and
``heap_factor``, how far below the k-th score a block's summary may be and still be scanned) are its
operating points, each labelled approximate. Its forward index keeps values in float16, exact for the
integers up to 2048 that quantised impacts stay well under.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmark.common.clock import clock
from benchmark.formats.trec_run import Hits
from benchmark.retrieval.engines import Engine, Point, add_time, ranked, register

FILE = "index"  # Seismic saves ``index.index.seismic``
SUFFIX = ".index.seismic"


@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    import seismic

    return seismic.SeismicIndex.load(path)


def _point(query_cut: int, heap_factor: float) -> Point:
    return Point(f"qc{query_cut}-hf{heap_factor}", False, {"query_cut": query_cut, "heap_factor": heap_factor})


class Seismic(Engine):
    name = "seismic"
    package = "pyseismic-lsr"
    module = "seismic"
    revision = 1  # 1: a batch's hits found by the query each names (they had been taken in the order sent)
    # the package's documented default first, then more query terms and a higher heap factor
    points = (_point(10, 0.8), _point(5, 0.7), _point(20, 0.9), _point(50, 1.0))

    def build(self, shards: Path, index: Path, threads: int) -> dict[str, int]:
        import numpy as np
        import seismic

        from benchmark.formats import vectors

        terms: set[str]
        dataset, terms = seismic.SeismicDataset(), set()
        kind = seismic.get_seismic_string()
        for row in vectors.read_collection(shards):
            kept = {t: w for t, w in row.vector.items() if w > 0}
            if kept:  # an empty document scores 0 for every query, as in Lucene (which skips it)
                terms.update(kept)
                dataset.add_document(
                    row.id, np.array(list(kept), dtype=kind), np.array(list(kept.values()), dtype=np.float32)
                )
        built = seismic.SeismicIndex.build_from_dataset(dataset, num_threads=threads)
        Path(index).mkdir(parents=True, exist_ok=True)
        built.save(str(Path(index) / FILE))
        _load.cache_clear()
        return {"documents": int(dataset.len), "unique_terms": len(terms)}

    def search(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> Hits:
        import numpy as np
        import seismic

        loaded = _load(str(Path(index) / (FILE + SUFFIX)))
        kind = seismic.get_seismic_string()
        qids = [q for q in queries if queries[q]]
        components = [np.array(list(queries[q]), dtype=kind) for q in qids]
        values = [np.array(list(queries[q].values()), dtype=np.float32) for q in qids]
        began = clock()
        cut, factor = point.knobs["query_cut"], point.knobs["heap_factor"]
        # each query goes in as its position and every hit names it: a batch's lists can come back in another
        # order than the queries went in (seen on 5 queries), and an id past the string type's 100 characters
        # would come back cut
        if len(qids) == 1:  # one query: its own call, without a thread pool's start
            results = [loaded.search("0", components[0], values[0], k, cut, factor)]
        else:
            positions = np.array([str(i) for i in range(len(qids))], dtype=kind)
            results = (
                loaded.batch_search(positions, components, values, k, cut, factor, num_threads=threads) if qids else []
            )
        add_time(timing, began)
        found: dict[str, list[tuple[str, float]]] = {q: [] for q in queries}
        for hits in results:
            if hits:  # a query without hits keeps its empty list
                found[qids[int(hits[0][0])]] = ranked([(docid, score) for _, score, docid in hits])
        return found


register(Seismic())
