"""The index stage: a Lucene index that describes itself in its config.json.

``bm25`` indexes the data stage's JsonCollection; ``impact`` indexes the encode stage's
JsonVectorCollection shards with ``--impact --pretokenized``. The search stage reads the type
from here instead of restating it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from benchmark import faults, lucene
from benchmark.errors import BenchmarkError

INDEX_TYPE_TO_BUILDER = {
    "bm25": (lucene.build_bm25_index, "corpus"),  # the corpus stage's JsonCollection
    "impact": (lucene.build_impact_index, "docs"),
}


def index_stage(index_type: str, parent_dir: Path, out: Path, threads: int = 2) -> dict[str, Any]:
    build, sub = INDEX_TYPE_TO_BUILDER[index_type]
    target = out / "index"
    if target.exists():  # a half-built Lucene index is never reused
        shutil.rmtree(target)
    build(Path(parent_dir) / sub, target, threads)
    faults.point("index:built")
    stats = lucene.index_stats(target)
    if stats["documents"] == 0:
        raise BenchmarkError(f"the {index_type} index built from {parent_dir} holds no documents; check that stage's output")
    return {"type": index_type, "source": str(parent_dir), **stats}
