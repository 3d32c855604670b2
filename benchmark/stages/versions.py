"""The stage-version lock: each kind's VERSION next to a digest of the code that decides its output.

``VERSION`` enters every stage id, so bumping it recomputes the kind's stages; forgetting to bump it
after changing what a stage computes would serve stale results from the cache. The lock
(``versions.json``) records, per kind, the VERSION and the digest of its ``sources`` (their syntax
trees without docstrings: comments, docstrings and formatting do not count).
``tests/stages/test_stage_versions.py`` fails when a digest changed but the VERSION did not.

    python -m benchmark.stages.versions            # show what changed
    python -m benchmark.stages.versions --lock     # record bumped kinds
    python -m benchmark.stages.versions --lock --same-output KIND   # a refactor: same output, no bump
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from benchmark.stages.store import StageKind

LOCK = Path(__file__).with_name("versions.json")


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


def module_digest(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise ModuleNotFoundError(module)
    tree = _strip_docstrings(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def source_digest(kind: type[StageKind[Any, Any]]) -> str:
    digest = hashlib.sha256()
    for module in sorted(kind.sources):
        digest.update(f"{module}:{module_digest(module)}\n".encode())
    return digest.hexdigest()[:16]


def current() -> dict[str, dict[str, object]]:
    from benchmark.stages import KINDS

    return {name: {"version": kind.VERSION, "source": source_digest(kind)} for name, kind in KINDS.items()}


def locked() -> dict[str, dict[str, object]]:
    return json.loads(LOCK.read_text(encoding="utf-8")) if LOCK.exists() else {}


def problems() -> list[str]:
    """Kinds whose code changed without a VERSION bump (or whose lock entry is stale)."""
    out = []
    lock, now = locked(), current()
    for name, entry in now.items():
        old = lock.get(name)
        if old is None:
            out.append(f"stage kind {name!r} is not in {LOCK.name}; run `python -m benchmark.stages.versions --lock`")
        elif old["source"] != entry["source"] and old["version"] == entry["version"]:
            out.append(
                f"the code of stage kind {name!r} changed but its VERSION is still {entry['version']}: "
                "bump it if its output changes, or run "
                f"`python -m benchmark.stages.versions --lock --same-output {name}`"
            )
        elif old != entry:
            out.append(
                f"stage kind {name!r}: {LOCK.name} says {old}, the code {entry}; run "
                "`python -m benchmark.stages.versions --lock` to record the bump"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.stages.versions", description=__doc__.split("\n\n")[0])
    p.add_argument("--lock", action="store_true", help="record the current versions and digests")
    p.add_argument(
        "--same-output",
        action="append",
        default=[],
        metavar="KIND",
        help="accept a code change of KIND without a bump (its output is unchanged)",
    )
    args = p.parse_args(argv)
    lock, now = locked(), current()
    if not args.lock:
        for line in problems() or ["every stage kind matches its lock"]:
            print(line)
        return 0
    for name, entry in now.items():
        old = lock.get(name)
        changed = old and old["source"] != entry["source"] and old["version"] == entry["version"]
        if changed and name not in args.same_output:
            print(
                f"refusing: {name!r} changed without a VERSION bump; bump it or pass --same-output {name}",
                file=sys.stderr,
            )
            return 2
    LOCK.write_text(json.dumps(now, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
