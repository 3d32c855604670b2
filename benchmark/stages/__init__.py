"""The stage kinds, one module each, in pipeline order:

topics, corpus → backbone (+ rescale) → triples → train → encode, queries → index → search → evaluate;
runfile: a TREC run made elsewhere (``--run``), evaluated like a search stage's.

``store`` holds what every kind stands on: the kinds' base class, stage nodes and the ``runs/`` store
(``claims``: no stage computed twice at once); ``versions`` locks each kind's code.

``KINDS`` maps a kind's name to its class (a registry that refuses duplicates). Importing this
package imports no heavy library: each kind imports torch, transformers or pyserini inside ``run``.
"""

from __future__ import annotations

from typing import Any

from benchmark.common.registry import Registry
from benchmark.stages.backbone import Backbone
from benchmark.stages.corpus import Corpus
from benchmark.stages.encode import Encode
from benchmark.stages.evaluate import Evaluate
from benchmark.stages.index import Index
from benchmark.stages.queries import Queries
from benchmark.stages.runfile import RunFile
from benchmark.stages.search import Search
from benchmark.stages.store import Context, StageKind
from benchmark.stages.topics import Topics
from benchmark.stages.train import Train
from benchmark.stages.triples import Triples

KINDS: Registry[type[StageKind[Any, Any]]] = Registry("stage kind")
for _kind in (Topics, Corpus, Backbone, Triples, Train, Encode, Queries, Index, Search, Evaluate, RunFile):
    KINDS.register(_kind.name, _kind)


__all__ = [
    "KINDS",
    "Context",
    "Topics",
    "Corpus",
    "Backbone",
    "Triples",
    "Train",
    "Encode",
    "Queries",
    "Index",
    "Search",
    "Evaluate",
    "RunFile",
]
