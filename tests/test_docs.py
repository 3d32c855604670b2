"""Every path, module and command the README and docs/ name exists: a renamed file or module fails here,
not in a reader's terminal."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: `python -m a.b.c` anywhere in a page
COMMAND = re.compile(r"python3? -m (benchmark(?:\.[A-Za-z_][\w]*)*)")
#: a dotted name of this package in backticks: `benchmark.model.heads` or
# `benchmark.model.heads.attach_projection_scale`
DOTTED = re.compile(r"`(benchmark(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
#: a path of this repository in backticks: `benchmark/model/heads.py`, `results/perf/perf.amd.md`, `docs/x.md`
PATH = re.compile(r"`((?:benchmark|tests|scripts|docs|results|\.ci)/[^`\s]*)`")
#: a relative markdown link target
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)")


def _pages() -> list[tuple[Path, str]]:
    return [(page, page.read_text(encoding="utf-8")) for page in PAGES]


def _resolves(dotted: str) -> bool:
    """A module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        obj: object = importlib.import_module(name)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_pages_exist():
    assert (ROOT / "README.md").is_file() and len(PAGES) > 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_module_path_and_link_exists(page: Path):
    text = page.read_text(encoding="utf-8")
    missing = []
    for module in set(COMMAND.findall(text)):
        if importlib.util.find_spec(module) is None:
            missing.append(f"python -m {module}")
    for dotted in set(DOTTED.findall(text)):
        if not _resolves(dotted):
            missing.append(dotted)
    for path in set(PATH.findall(text)):
        path = path.rstrip(".,:;)")
        if any(c in path for c in "*<>…{}$") or re.search(r"\b(NAME|N{3,}|KEY|SUITE|KIND|ID)\b", path) or "@" in path:
            continue  # a pattern or a placeholder (NAME, NNNNN), not one file
        top = Path(*Path(path).parts[:2])
        if top.parts[0] == "results" and not (ROOT / top).exists():
            continue  # where a suite that is not committed writes its results: an output, made by its command
        if not (ROOT / path).exists():
            missing.append(path)
    for target in set(LINK.findall(text)):
        if not (page.parent / target).exists():
            missing.append(f"link {target}")
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: {sorted(missing)}"


def test_the_checker_catches_a_stale_name(tmp_path):
    """The patterns find what a stale page would name (so the test above is not vacuous)."""
    text = (
        "Run `python -m benchmark.nothing_here`, see `benchmark/no_such.py` and `benchmark.model.heads.nope`; "
        "[x](no-page.md)"
    )
    assert COMMAND.findall(text) == ["benchmark.nothing_here"]
    assert PATH.findall(text) == ["benchmark/no_such.py"]
    assert DOTTED.findall(text) == ["benchmark.model.heads.nope"] and not _resolves("benchmark.model.heads.nope")
    assert _resolves("benchmark.model.heads.attach_projection_scale") and _resolves("benchmark.run")
    assert LINK.findall(text) == ["no-page.md"]
