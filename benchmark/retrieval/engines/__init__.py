"""Search engines for integer impact vectors, one module each, behind one registry.

Every engine builds its index from the encode stage's JsonVectorCollection shards (the same integer
impacts for every engine, no requantisation) and searches the queries stage's integer vectors for the
top k. An engine is named by a spec, ``NAME`` or ``NAME:POINT``: the point is one of the engine's
labelled operating points (its default when left out). ``lucene`` is the default and the exact
reference; an exact engine returns Lucene's top-k scores (ties may be ordered differently), an
approximate one is labelled so wherever it appears.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.common import clock
from benchmark.common.errors import BenchmarkError
from benchmark.common.registry import Registry
from benchmark.formats.trec_run import Hits

DEFAULT = "lucene"


@dataclass(frozen=True)
class Point:
    """One operating point: its label, whether its top k are the exact ones, and the engine's knobs."""

    name: str
    exact: bool
    knobs: Mapping[str, Any] = field(default_factory=dict)


class Engine:
    """A backend: ``build`` an index folder from the shards, ``search`` a batch of queries in it."""

    name = ""
    package = ""  # the pip distribution that provides it ("" when the harness's own dependencies do)
    module = ""  # its import name
    points: tuple[Point, ...] = ()
    #: bumped when the engine's index or search changes what it returns: it enters the engine's index
    #: stage id (``Index.Config.engine_revision``), so Lucene's stages and other engines' keep their ids
    revision = 0

    def build(self, shards: Path, index: Path, threads: int) -> dict[str, int]:
        """Write the index under ``index``; returns ``{"documents": n, "unique_terms": m}``."""
        raise NotImplementedError

    def search(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> Hits:
        """Top ``k`` per query, best first; adds the engine's own seconds to ``timing["engine_s"]``."""
        raise NotImplementedError

    def run_lines(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> dict[str, list[str]] | None:
        """``search``'s hits as each query's run lines, as ``format_run`` prints them, made without a hit
        tuple or a ranked list per query: strings whose concatenation is the query's lines (one a line, or all
        in one); None where the engine has no such path (the search stage then formats ``search``'s hits)."""
        return None

    def point(self, name: str) -> Point:
        for each in self.points:
            if each.name == name:
                return each
        valid = ", ".join(f"{self.name}:{p.name}" for p in self.points)
        raise BenchmarkError(
            f"unknown operating point {name!r} of engine {self.name!r}; valid: {valid}. Pass one of them to --engines"
        )

    def available(self) -> bool:
        return not self.module or importlib.util.find_spec(self.module) is not None


ENGINES: Registry[Engine] = Registry("search engine", "Pass one of them to --engines (e.g. --engines lucene,pisa)")


def register(engine: Engine) -> Engine:
    return ENGINES.register(engine.name, engine)


@dataclass(frozen=True)
class Choice:
    """A parsed spec: the engine and its operating point."""

    engine: Engine
    point: Point

    @property
    def spec(self) -> str:
        """The canonical spec: the name alone at the engine's default point."""
        default = self.engine.points[0].name
        return self.engine.name if self.point.name == default else f"{self.engine.name}:{self.point.name}"

    @property
    def name(self) -> str:
        """The engine and its point: ``pisa:maxscore``."""
        return f"{self.engine.name}:{self.point.name}"

    @property
    def label(self) -> str:
        """How a row or column names it: ``pisa:maxscore``, ``seismic:qc10-hf0.8 (approximate)``."""
        return self.name + ("" if self.point.exact else " (approximate)")


def choose(spec: str) -> Choice:
    """Parse ``NAME[:POINT]``; one line naming the value, the valid engines and the fix when it is unknown
    or its package is missing (checked here, before any work)."""
    _load()
    name, _, point = str(spec).strip().partition(":")
    engine = ENGINES[name]
    if not engine.available():
        raise BenchmarkError(
            f"search engine {name!r} needs the Python package {engine.package!r}, which is not installed; "
            f"install it (`pip install {engine.package}`, or the project's `engines` extra), "
            f"or pick another of: {', '.join(ENGINES)}"
        )
    return Choice(engine, engine.point(point) if point else engine.points[0])


def choose_all(specs: Sequence[str]) -> list[Choice]:
    """Several specs (``--engines``), each once in the given order."""
    out: list[Choice] = []
    for spec in specs:
        choice = choose(spec)
        if choice.spec not in [c.spec for c in out]:
            out.append(choice)
    if not out:
        raise BenchmarkError(f"--engines names no engine; valid: {', '.join(ENGINES)} (e.g. --engines lucene,pisa)")
    return out


def require_exact(spec: str, what: str) -> Choice:
    """The choice, refused in one line when ``what`` needs exact scores and the point is approximate."""
    choice = choose(spec)
    if not choice.point.exact:
        exact = [f"{e}:{p.name}" for e, eng in ENGINES.items() for p in eng.points if p.exact]
        raise BenchmarkError(
            f"{what} needs exact scores, and {choice.label} ranks approximately; valid exact engines: "
            f"{', '.join(exact)}. Pick one of them"
        )
    return choice


_LOADED = False


#: the engine modules, each registering itself on import, in the order the engines are listed: Lucene (the
#: default and the reference) first, the published engines, then the harness's own
MODULES = ("lucene", "pisa", "seismic", "exhaustive")


def _load() -> None:
    """Import the engine modules; none imports its package until it builds or searches."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        import importlib

        for module in MODULES:
            importlib.import_module(f"{__name__}.{module}")


def add_time(timing: dict[str, float] | None, began: tuple[float, float], key: str = "engine") -> None:
    """``timing["engine_s"]`` (and ``engine_cpu_s``) += the time since ``began`` (``clock()``) inside the engine's
    own call; ``key="writer"``: printing its output as run lines (``run_lines``), apart from it
    (``python -m benchmark.perf search-stage`` shows both)."""
    clock.add_time(timing, began, key)


def ranked(found: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Hits at their exact integers (an engine's float32 sums below 2**24 are exact), best first, ties by
    document id as Anserini breaks them."""
    return sorted(((d, float(round(s))) for d, s in found), key=lambda hit: (-hit[1], hit[0]))


def recall_of_exact(exact: Hits, found: Hits, k: int) -> float:
    """Mean over queries of |found top k ∩ exact top k| / |exact top k|: how much of the exact ranking an
    approximate point keeps. A found hit whose score equals the exact k-th score counts as kept: ties may be
    ordered either way (also past the exact list's end), and every score here is an exact integer dot product."""
    shares = []
    for qid, ranked_hits in exact.items():
        top = ranked_hits[:k]
        if not top:
            continue
        floor = top[-1][1]
        members = {d for d, _ in top}
        kept = sum(1 for d, s in found.get(qid, [])[:k] if d in members or s == floor)
        shares.append(min(len(top), kept) / len(top))
    return sum(shares) / len(shares) if shares else 1.0


def names() -> list[str]:
    _load()
    return list(ENGINES)


def count_documents(shards: Path) -> tuple[int, int]:
    """(documents with at least one term, distinct terms) of the shards, as a Lucene impact index counts them."""
    from benchmark.formats import vectors

    terms: set[str]
    documents, terms = 0, set()
    for row in vectors.read_collection(shards):
        if any(w > 0 for w in row.vector.values()):
            documents += 1
            terms.update(t for t, w in row.vector.items() if w > 0)
    return documents, len(terms)
