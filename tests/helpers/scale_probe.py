"""Peak memory of one streaming step, in a fresh process (for tests/perf/test_scale.py).

``python tests/helpers/scale_probe.py JOB ARGS…`` runs one step and prints a JSON line: the peak growth of
the resident set during the step in kB (VmHWM reset through /proc/self/clear_refs just before it, with
the step's modules already imported, so only what the step holds counts) and what it returned.

* ``evaluate RUN TOPICS CORPUS OUT``: the evaluate stage's ``evaluate_stage``;
* ``search INDEX TOPICS OUT``: the search stage on a BM25 index (k = 1000, one Lucene thread);
* ``export RUN OUT``: the report's gzipped TREC export of a run;
* ``ids N``: ``IdSet`` of N ids streamed in, then asked about a block of 100,000 ids;
* ``corpus FOLDER OUT [MAX_DOCS]``: the corpus stage's ``materialise_corpus`` of a local BEIR folder, cut
  to ``MAX_DOCS`` documents where given.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def measure(fn):
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = _status("VmHWM")
    result = fn()
    return _status("VmHWM") - base, result


def main(job: str, *args: str) -> None:
    if "SCALE_PROBE_IDSET_BUFFER" in os.environ:  # a small buffer: sizes CI affords are many buffers past it
        from benchmark.common import idset

        idset.BUFFER = int(os.environ["SCALE_PROBE_IDSET_BUFFER"])
    if job == "evaluate":
        from benchmark.evaluation.measures import evaluate_stage

        run, topics, corpus, out = map(Path, args)
        import ir_measures  # noqa: F401

        grew, result = measure(lambda: evaluate_stage(run, topics, corpus, ["RR@10", "nDCG@10"], out))
    elif job == "search":
        from benchmark.retrieval import lucene
        from benchmark.stages import Context
        from benchmark.stages.search import Search
        from benchmark.stages.store import Inputs

        index, topics, out = map(Path, args)
        lucene.start_jvm()  # the JVM's own start is not the search's
        inputs = Inputs(
            {"index": index, "queries": topics},
            {"index": {"kind": "index", "record": {"type": "bm25"}}, "queries": {"kind": "topics"}},
        )
        config = Search.Config(k=1000, k1=0.9, b=0.4)
        grew, record = measure(lambda: Search.run(config, inputs, out, Context(threads=1, progress=False)))
        result = record.to_json()
    elif job == "export":
        from benchmark.common.atomic import atomic_write
        from benchmark.report.results import write_tagged_run

        run, out = map(Path, args)

        def export():
            with atomic_write(out, "wb") as fh:
                write_tagged_run(run, "tag", fh)

        grew, result = measure(export)
    elif job == "ids":
        from benchmark.common.idset import IdSet

        n = int(args[0])

        def build_and_ask():  # the ids streamed, as a stage reads them; then a block of hits asked
            s = IdSet(f"doc{i:09d}" for i in range(n))
            absent = s.missing(f"doc{i:09d}" for i in range(0, 2 * n, max(1, 2 * n // 100_000)))
            return {"distinct": len(s), "absent": len(absent)}

        grew, result = measure(build_and_ask)
    elif job == "corpus":
        from benchmark.data.datasets import materialise_corpus

        folder, out = map(Path, args[:2])
        max_docs = int(args[2]) if len(args) > 2 else None
        grew, result = measure(lambda: materialise_corpus(str(folder.resolve()), out, max_docs, 0, frozenset(), False))
    else:
        raise SystemExit(f"unknown job {job!r}")
    print(json.dumps({"peak_growth_kb": grew, "result": result}))


if __name__ == "__main__":
    main(*sys.argv[1:])
