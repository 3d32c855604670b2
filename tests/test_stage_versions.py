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
    c.write_text('X = 2\n\ndef f():\n    return X\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_digest("mod_a") == module_digest("mod_b") != module_digest("mod_c")


def test_every_kind_declares_its_sources():
    for name, kind in KINDS.items():
        assert kind.sources and f"benchmark.stages.{name}" in kind.sources, name
