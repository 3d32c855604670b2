"""A stage kind's code cannot change without a VERSION bump (or an explicit same-output lock)."""

from __future__ import annotations

from benchmark.stages import KINDS
from benchmark.stages.versions import module_digest, problems


def test_every_kind_matches_its_version_lock():
    assert problems() == []


def test_docstrings_and_comments_do_not_count(tmp_path, monkeypatch):
    a = tmp_path / "mod_a.py"
    a.write_text('"""Doc."""\nX = 1  # one\n\ndef f():\n    """Why."""\n    return X\n')
    b = tmp_path / "mod_b.py"
    b.write_text('"""Other doc."""\nX = 1\n\n\ndef f():\n    return X\n')
    c = tmp_path / "mod_c.py"
    c.write_text("X = 2\n\ndef f():\n    return X\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_digest("mod_a") == module_digest("mod_b") != module_digest("mod_c")


def test_every_kind_declares_its_sources():
    for name, kind in KINDS.items():
        assert kind.sources and f"benchmark.stages.{name}" in kind.sources, name


# What a stage module may import without locking it: the machinery around a stage's output (claims,
# atomic writes, fault points, errors, input fingerprints for ids, typed config parsing, disk space), not its values.
INFRASTRUCTURE = {
    "benchmark.stages.store",
    "benchmark.common.atomic",
    "benchmark.common.kill_points",
    "benchmark.common.errors",
    "benchmark.common.fingerprint",
    "benchmark.common.config",
    "benchmark.common.disk",
}


def test_every_module_a_stage_computes_with_is_locked():
    """A value a stage records (e.g. the search stage's FLOPS) computed in a module outside its sources
    would keep old bytes under the same id after that module changed."""
    import ast
    import importlib
    import importlib.util

    def is_module(package: str, name: str) -> bool:
        spec = importlib.util.find_spec(package)
        is_package = bool(spec and spec.submodule_search_locations)
        return is_package and importlib.util.find_spec(f"{package}.{name}") is not None

    for name, kind in KINDS.items():
        module = importlib.import_module(kind.__module__)
        imported = set()
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        typing_only = {  # imports under ``if TYPE_CHECKING:`` name types; nothing is computed with them
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            for stmt in block.body
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchmark"):
                # ``from benchmark.common import kill_points`` imports the module benchmark.common.kill_points
                imported |= {
                    f"{node.module}.{a.name}" if is_module(node.module, a.name) else node.module for a in node.names
                }
        unlocked = {m for m in imported - INFRASTRUCTURE - set(kind.sources) if not m.startswith("benchmark.stages.")}
        assert not unlocked, (name, sorted(unlocked))


def test_a_locked_package_is_locked_with_all_its_modules():
    """A stage that lists a package (its face) computes with the modules behind it: a change there
    must change the digest too."""
    import importlib
    import pkgutil

    for name, kind in KINDS.items():
        for source in kind.sources:
            package = importlib.import_module(source)
            if hasattr(package, "__path__"):
                inside = {
                    f"{source}.{m.name}" for m in pkgutil.iter_modules(package.__path__) if m.name != "__main__"
                }  # a command, not what a stage computes with
                assert inside <= set(kind.sources), (name, sorted(inside - set(kind.sources)))
