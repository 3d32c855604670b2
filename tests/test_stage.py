"""Stage ids, atomic publication, reuse, --force, and partial folders never counted as complete."""

from __future__ import annotations

import json

import pytest

from benchmark.errors import BenchmarkError
from benchmark.stage import Stage, Store


def _write(out, text="x"):
    (out / "out.txt").write_text(text)
    return {"n": 1}


def test_id_hashes_config_and_parents():
    a = Stage("data", {"dataset": "beir/scifact/test"})
    b = Stage("data", {"dataset": "beir/scifact/test"})
    c = Stage("data", {"dataset": "beir/nfcorpus/test"})
    assert a.id == b.id and a.id != c.id and a.id.startswith("data-")
    assert Stage("index", {"type": "bm25"}, {"source": a}).id != Stage("index", {"type": "bm25"}, {"source": c}).id
    # key order in the config does not matter
    assert Stage("x", {"a": 1, "b": 2}).id == Stage("x", {"b": 2, "a": 1}).id


def test_rerun_reuses_and_force_redoes(tmp_path):
    logs = []
    store = Store(tmp_path, log=logs.append)
    stage = Stage("demo", {"v": 1})
    calls = []
    store.run(stage, lambda out: calls.append(1) or _write(out))
    store.run(stage, lambda out: calls.append(1) or _write(out))
    assert calls == [1] and logs[-1] == f"[cached] {stage.id}"
    meta = json.loads((tmp_path / "demo" / stage.id / "config.json").read_text())
    assert meta["status"] == "complete" and meta["id"] == stage.id and meta["record"] == {"n": 1}
    forced = Store(tmp_path, force=True, log=logs.append)
    forced.run(stage, lambda out: calls.append(1) or _write(out, "y"))
    forced.run(stage, lambda out: calls.append(1) or _write(out, "z"))  # once per process
    assert calls == [1, 1] and (tmp_path / "demo" / stage.id / "out.txt").read_text() == "y"
    assert not list((tmp_path / "demo").glob(".*"))  # no partial or trash left behind


def test_failed_stage_publishes_nothing(tmp_path):
    store = Store(tmp_path, log=lambda m: None)
    stage = Stage("demo", {"v": 2})

    def boom(out):
        (out / "half.txt").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        store.run(stage, boom)
    assert not store.path(stage).exists() and not store.is_done(stage)
    store.run(stage, _write)  # the partial folder is discarded, not trusted
    assert not (store.path(stage) / "half.txt").exists()


@pytest.mark.parametrize("content", [None, "{not json", '{"id": "other", "status": "complete"}',
                                     '{"id": "SELF", "status": "running"}'])
def test_foreign_or_corrupt_folder_is_not_complete(tmp_path, content):
    store = Store(tmp_path, log=lambda m: None)
    stage = Stage("demo", {"v": 3})
    folder = store.path(stage)
    folder.mkdir(parents=True)
    (folder / "junk").write_text("junk")
    if content is not None:
        (folder / "config.json").write_text(content.replace("SELF", stage.id))
    assert not store.is_done(stage)
    store.run(stage, _write)
    assert store.is_done(stage) and not (folder / "junk").exists()


def test_resumable_stage_keeps_its_partial_folder(tmp_path):
    store = Store(tmp_path, log=lambda m: None)
    stage = Stage("demo", {"v": 4}, resumable=True)
    partial = store.partial_path(stage)
    partial.mkdir(parents=True)
    (partial / "shard-0").write_text("done before the kill")
    store.run(stage, lambda out: {"kept": (out / "shard-0").read_text()})
    assert store.load(stage)["record"] == {"kept": "done before the kill"}


def test_dropped_artifacts_make_stage_not_done(tmp_path):
    store = Store(tmp_path, log=lambda m: None)
    stage = Stage("demo", {"v": 5})
    def make(out):
        (out / "docs").mkdir()
        (out / "docs" / "a").write_text("1234")
        return {}

    store.run(stage, make)
    assert store.drop(stage, ["docs"]) == 4
    assert not store.is_done(stage) and not (store.path(stage) / "docs").exists()


def test_unwritable_runs_dir_is_one_clear_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BenchmarkError, match="not writable.*--runs-dir"):
        Store(blocker / "runs").check_writable()
