"""Every path, module and command the README and docs/ name exists: a renamed file or module fails here,
not in a reader's terminal."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from helpers import ROOT

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


#: a command of this harness that only plans or prints help, as the pages show it (a fenced line or a code span)
CHEAP = re.compile(
    r"(?:\.venv/bin/)?(?:python3? -m benchmark(?:\.run)?|benchmark-run|benchmark run)\b([^`#|\n]*?--(?:dry-run|help)"
    r"[^`#|\n]*)"
)
#: the prefixes that name the run command, however a page spells it
RUN_PREFIX = re.compile(r"^(?:\.venv/bin/)?(?:python3? -m benchmark\.run|benchmark-run|benchmark run)\b")


def cheap_commands() -> list[tuple[str, list[str]]]:
    """(page, the run command's arguments) for every ``--dry-run`` or ``--help`` of it the pages show,
    placeholders (NAME, N, PATH) left out."""
    import shlex

    out = []
    for page, text in _pages():
        for match in re.finditer(CHEAP, text):
            line = match.group(0).strip()
            if not RUN_PREFIX.match(line) or re.search(r"\b[A-Z]{2,}\b|<|…", line):
                continue
            out.append((page.name, shlex.split(RUN_PREFIX.sub("", line))))
    return list({tuple(a): (p, a) for p, a in out}.values())  # each distinct command once


def test_every_dry_run_and_help_the_pages_show_runs(tmp_path, capsys):
    """Each ``--dry-run`` and ``--help`` of the run command in the README and docs/ is run as written (in this
    process, without Ray or a GPU): a flag renamed or a suite gone fails here, not in a reader's terminal."""
    from benchmark.run import main

    commands = cheap_commands()
    assert len(commands) >= 5, commands  # the README's, running.md's and cluster.md's at least
    for page, argv in commands:
        if "--help" in argv:
            with pytest.raises(SystemExit) as exit_:
                main(argv)
            assert exit_.value.code == 0, (page, argv)
            continue
        code = main([*argv, "--runs-dir", str(tmp_path / "runs")])
        captured = capsys.readouterr()
        assert code == 0, (page, argv, captured.err)
        assert "stages, " in captured.out, (page, argv)
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing
