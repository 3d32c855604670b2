"""The package reads in one direction: no module imports one that imports it back, directly or through
a folder (a subpackage counts as one unit, so ``stages/`` → ``negatives.py`` → ``stages/`` is a circle
too). Imports inside functions count: one placed there to dodge a circle is still a circle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "benchmark"


def _unit(module: str, package: Path) -> str:
    """``benchmark.stages.search`` → ``stages/``; ``benchmark.plan`` → ``plan.py``."""
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
                    base = ".".join(package_parts[:len(package_parts) - node.level + 1] + ([base] if base else []))
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
    (pkg / "stages").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stages" / "__init__.py").write_text("")
    (pkg / "stages" / "triples.py").write_text("from benchmark.negatives import mine\n")
    (pkg / "negatives.py").write_text("def mine():\n    from benchmark.stages.search import RUN\n")
    (pkg / "stages" / "search.py").write_text("RUN = 'run.trec'\n")
    graph = import_graph(pkg)
    assert circles(graph) == [["negatives.py", "stages/"]]
    assert graph["negatives.py"]["stages/"] == ["benchmark/negatives.py:2"]
