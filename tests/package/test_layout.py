"""The package reads in one direction. Its top level holds folders, one per layer of the pipeline, and
``run.py``; ``LAYERS`` orders them from the bottom up, and a unit imports only units of its own layer or
below it, never one above (an arrow back up). No module imports one that imports it back, directly or
through a folder (a subpackage counts as one unit, so ``stages/`` → ``data/`` → ``stages/`` is a circle
too). Imports inside functions count: one placed there to dodge a circle is still a circle."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "benchmark"

#: The units of the package from the bottom up, in the pipeline's order (suite → data → backbone (+ rescale)
#: → train → encode → index → search → evaluate → report): each may import only the units listed before it.
LAYERS = [
    "common/",
    "formats/",
    "data/",
    "model/",
    "splade/",
    "training/",
    "retrieval/",
    "evaluation/",
    "stages/",
    "suites/",
    "pipeline/",
    "report/",
    "perf/",
    "run.py",
    "api.py",  # benchmark.evaluate and benchmark.load_results: above the run command they share stages with
    "__main__.py",  # the `benchmark` command: dispatches to run, report, export, norms and perf
]
#: What may stand loose at the top beside the folders.
TOP_FILES = {"__init__.py", "__main__.py", "run.py", "api.py"}


def _unit(module: str, package: Path) -> str:
    """``benchmark.stages.search`` → ``stages/``; ``benchmark.run`` → ``run.py``."""
    parts = module.split(".")[1:]
    if len(parts) > 1 or (parts and (package / parts[0]).is_dir()):
        return parts[0] + "/"
    return parts[0] + ".py"


def _module(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, package: Path) -> str | None:
    """The longest prefix of ``name`` that is a module or package of this tree."""
    parts = name.split(".")
    while len(parts) > 1:
        base = package.parent.joinpath(*parts)
        if base.with_suffix(".py").is_file() or base.is_dir():
            return ".".join(parts)
        parts.pop()
    return None


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """unit → imported unit → ['file:line', …], for every import of this package, wherever it stands."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(package.rglob("*.py")):
        module = _module(path, package)
        if module == "benchmark":
            continue
        unit = _unit(module, package)
        package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package_parts[: len(package_parts) - node.level + 1] + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = _resolve(name, package) if name.startswith("benchmark.") else None
                if target and _unit(target, package) != unit:
                    where = f"{path.relative_to(package.parent)}:{node.lineno}"
                    seen = graph.setdefault(unit, {}).setdefault(_unit(target, package), [])
                    if where not in seen:
                        seen.append(where)
    return graph


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    graph = import_graph()
    found = circles(graph)
    lines = [f"{a} -> {b} ({', '.join(graph[a][b])})" for c in found for a in c for b in graph.get(a, {}) if b in c]
    assert not found, "import circle(s):\n" + "\n".join(lines)


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    """The detector itself: a two-unit circle through an import inside a function is found."""
    pkg = tmp_path / "benchmark"
    for folder in ("data", "stages"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "stages" / "triples.py").write_text("from benchmark.data.negatives import mine\n")
    (pkg / "data" / "negatives.py").write_text("def mine():\n    from benchmark.stages.search import RUN\n")
    (pkg / "stages" / "search.py").write_text("RUN = 'run.trec'\n")
    graph = import_graph(pkg)
    assert circles(graph) == [["data/", "stages/"]]
    assert graph["data/"]["stages/"] == ["benchmark/data/negatives.py:2"]


def arrows_back_up(graph: dict[str, dict[str, list[str]]], layers: list[str]) -> list[str]:
    """``a -> b (file:line, …)`` for every import of a unit by one below it in ``layers``."""
    floor = {unit: n for n, unit in enumerate(layers)}
    return [
        f"{a} -> {b} ({', '.join(graph[a][b])})" for a in sorted(graph) for b in sorted(graph[a]) if floor[b] > floor[a]
    ]


def test_every_unit_has_a_layer() -> None:
    units = {p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert units == set(LAYERS), (
        f"units without a layer: {sorted(units - set(LAYERS))}; layers without a unit: {sorted(set(LAYERS) - units)}"
    )
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in TOP_FILES)
    assert not loose, f"loose modules at the top of benchmark/ (move each into the folder of its layer): {loose}"


def test_no_import_runs_back_up() -> None:
    graph = import_graph()
    assert not (up := arrows_back_up(graph, LAYERS)), "import(s) from a lower layer to a higher one:\n" + "\n".join(up)


def test_the_check_sees_an_arrow_back_up(tmp_path: Path) -> None:
    """The layer check itself: an import from a lower layer to a higher one, inside a function, is found."""
    pkg = tmp_path / "benchmark"
    for folder in ("common", "stages"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "common" / "disk.py").write_text("def usage():\n    from benchmark.stages.store import Store\n")
    (pkg / "stages" / "store.py").write_text("from benchmark.common.disk import usage\nclass Store: ...\n")
    graph = import_graph(pkg)
    assert arrows_back_up(graph, ["common/", "stages/"]) == ["common/ -> stages/ (benchmark/common/disk.py:2)"]
    assert arrows_back_up(graph, ["stages/", "common/"]) == ["stages/ -> common/ (benchmark/stages/store.py:1)"]


def _stage_kind_modules(package: Path) -> set[str]:
    """The modules of ``stages/`` that define a stage kind (a class deriving from ``StageKind``)."""
    out = set()
    for path in sorted((package / "stages").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(
            isinstance(n, ast.ClassDef) and any(getattr(b, "id", None) == "StageKind" for b in n.bases)
            for n in tree.body
        ):
            out.add(_module(path, package))
    return out


def sibling_stage_imports(package: Path = PACKAGE) -> list[str]:
    """``kind -> kind (file:line)`` for every import of one stage kind's module (or of the ``stages``
    package, which imports them all) by another's: a stage reads its parents' files through ``formats/``."""
    kinds = _stage_kind_modules(package)
    stages = f"{package.name}.stages"
    out = []
    for module in sorted(kinds):
        path = package.parent.joinpath(*module.split(".")).with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if (name in kinds and name != module) or name == stages:
                    out.append(f"{module} -> {name} ({path.relative_to(package.parent)}:{node.lineno})")
    return out


def test_no_stage_kind_imports_another() -> None:
    found = sibling_stage_imports()
    assert not found, (
        "a stage kind imports another (read the parent's files through benchmark.formats, by the "
        "file name its format module holds):\n" + "\n".join(found)
    )


def test_the_check_sees_a_sibling_stage_import(tmp_path: Path) -> None:
    """The sibling check itself: an import inside a function, of another kind or of the stages package."""
    pkg = tmp_path / "benchmark"
    (pkg / "stages").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stages" / "__init__.py").write_text("from benchmark.stages.search import Search\n")
    (pkg / "stages" / "store.py").write_text("class StageKind: ...\n")
    (pkg / "stages" / "search.py").write_text(
        "from benchmark.stages.store import StageKind\nclass Search(StageKind): ...\n"
    )
    (pkg / "stages" / "evaluate.py").write_text(
        "from benchmark.stages.store import StageKind\nclass Evaluate(StageKind):\n"
        "    def run(self):\n        from benchmark.stages.search import Search\n        from benchmark import stages\n"
    )
    assert _stage_kind_modules(pkg) == {"benchmark.stages.search", "benchmark.stages.evaluate"}
    assert sibling_stage_imports(pkg) == [
        "benchmark.stages.evaluate -> benchmark.stages.search (benchmark/stages/evaluate.py:4)",
        "benchmark.stages.evaluate -> benchmark.stages (benchmark/stages/evaluate.py:5)",
    ]
