"""Stage ids, atomic publication, verified reuse, --force, claims, and partial folders never counted as complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.stages.store import Stage, StageKind, Store, added_field
from helpers import ROOT


class Demo(StageKind):
    name = "demo"
    VERSION = 1

    @dataclass(frozen=True)
    class Config:
        v: int = 0
        text: str = "x"

    @classmethod
    def run(cls, config, inputs, out, ctx):
        (out / "out.txt").write_text(config.text)
        return {"n": 1}


class Child(StageKind):
    name = "child"
    VERSION = 1
    parents = ("source",)
    Config = Demo.Config

    @classmethod
    def consistent(cls, record, parents):  # records of a kind with no declared Record: every key in details
        source = parents.get("source")
        n = source.details.get("n") if source is not None else None
        seen = record.details.get("n")
        return None if n is None or seen == n else f"child saw {seen}, source has {n}"


class DemoV2(Demo):
    VERSION = 2


def _write(out: Path, text: str = "x") -> dict:
    (out / "out.txt").write_text(text)
    return {"n": 1}


def _store(root: Path, logs: list | None = None, **kw) -> Store:
    return Store(root, log=(logs.append if logs is not None else (lambda m: None)), **kw)


def test_id_hashes_kind_version_config_and_parents():
    a = Stage(Demo, Demo.Config(1))
    assert a.id == Stage(Demo, Demo.Config(1)).id and a.id.startswith("demo-")
    assert a.id != Stage(Demo, Demo.Config(2)).id
    assert a.id != Stage(DemoV2, Demo.Config(1)).id  # a bumped VERSION is a new stage
    assert (
        Stage(Child, Demo.Config(), {"source": a}).id
        != Stage(Child, Demo.Config(), {"source": Stage(Demo, Demo.Config(2))}).id
    )
    with pytest.raises(TypeError, match="needs"):
        Stage(Child, Demo.Config())  # a missing parent role is a programming error


class DemoGrown(Demo):
    """Demo after a config field was added (its default computes what Demo computed)."""

    @dataclass(frozen=True)
    class Config:
        v: int = 0
        text: str = "x"
        mode: str = added_field("plain")


def test_an_added_field_keeps_the_published_ids_at_its_default():
    old = Stage(Demo, Demo.Config(1))
    assert Stage(DemoGrown, DemoGrown.Config(1)).id == old.id
    assert "mode" not in Stage(DemoGrown, DemoGrown.Config(1)).payload()["config"]
    grown = Stage(DemoGrown, DemoGrown.Config(1, mode="fused"))
    assert grown.id != old.id and grown.payload()["config"]["mode"] == "fused"


def test_rerun_reuses_and_force_redoes(tmp_path):
    logs: list[str] = []
    store = _store(tmp_path, logs)
    stage = Stage(Demo, Demo.Config(1))
    calls = []
    store.run(stage, lambda out: calls.append(1) or _write(out))
    store.run(stage, lambda out: calls.append(1) or _write(out))
    assert calls == [1] and logs[-1] == f"[cached] {stage.id}"
    meta = json.loads((tmp_path / "demo" / stage.id / "config.json").read_text())
    assert meta["status"] == "complete" and meta["id"] == stage.id and meta["record"] == {"n": 1}
    assert meta["version"] == 1 and meta["outputs"]["out.txt"][0] == 1 and len(meta["outputs"]["out.txt"][1]) == 64
    assert meta["environment"]["packages"]["torch"] and "python" in meta["environment"]
    forced = _store(tmp_path, force=True)
    forced.run(stage, lambda out: calls.append(1) or _write(out, "y"))
    forced.run(stage, lambda out: calls.append(1) or _write(out, "z"))  # once per process
    assert calls == [1, 1] and (tmp_path / "demo" / stage.id / "out.txt").read_text() == "y"
    assert not list((tmp_path / "demo").glob(".*"))  # no partial, claim or trash left behind


def test_failed_stage_publishes_nothing(tmp_path):
    store = _store(tmp_path)
    stage = Stage(Demo, Demo.Config(2))

    def boom(out):
        (out / "half.txt").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        store.run(stage, boom)
    assert not store.path(stage).exists() and not store.is_done(stage)
    store.run(stage, _write)  # the partial folder is discarded, not trusted
    assert not (store.path(stage) / "half.txt").exists()


@pytest.mark.parametrize(
    "content", [None, "{not json", '{"id": "other", "status": "complete"}', '{"id": "SELF", "status": "running"}']
)
def test_foreign_or_corrupt_folder_is_not_complete(tmp_path, content):
    store = _store(tmp_path)
    stage = Stage(Demo, Demo.Config(3))
    folder = store.path(stage)
    folder.mkdir(parents=True)
    (folder / "junk").write_text("junk")
    if content is not None:
        (folder / "config.json").write_text(content.replace("SELF", stage.id))
    assert not store.is_done(stage)
    store.run(stage, _write)
    assert store.is_done(stage) and not (folder / "junk").exists()


@pytest.mark.parametrize(
    "damage, verify, expected",
    [
        ("truncate", False, "out.txt is 2 bytes, recorded 5"),
        ("delete", False, "out.txt is missing"),
        ("same-size", False, None),  # sizes agree: only --verify can tell
        ("same-size", True, "out.txt differs from its recorded sha256"),
    ],
)
def test_damaged_stage_is_reported_and_recomputed(tmp_path, damage, verify, expected):
    stage = Stage(Demo, Demo.Config(4, "hello"))
    _store(tmp_path).run(stage, lambda out: _write(out, "hello"))
    target = tmp_path / "demo" / stage.id / "out.txt"
    {
        "truncate": lambda: target.write_text("he"),
        "delete": target.unlink,
        "same-size": lambda: target.write_text("HELLO"),
    }[damage]()
    logs: list[str] = []
    store = _store(tmp_path, logs, verify=verify)
    calls = []
    store.run(stage, lambda out: calls.append(1) or _write(out, "hello"))
    if expected is None:
        assert calls == [] and target.read_text() == "HELLO"
    else:
        assert calls == [1] and target.read_text() == "hello"
        assert f"[damaged] {stage.id}: {expected}; recomputing it" in logs


def test_counts_are_cross_checked_with_parents(tmp_path):
    logs: list[str] = []
    store = _store(tmp_path, logs)
    source = Stage(Demo, Demo.Config(5))
    child = Stage(Child, Demo.Config(5), {"source": source})
    store.run(source, lambda out: _write(out))
    store.run(child, lambda out: _write(out))
    meta = json.loads((store.path(source) / "config.json").read_text())  # the source changes behind its back
    meta["record"]["n"] = 2
    (store.path(source) / "config.json").write_text(json.dumps(meta))
    again = _store(tmp_path, logs)
    assert not again.is_done(child)
    assert f"[damaged] {child.id}: child saw 1, source has 2; recomputing it" in logs


def test_resumable_stage_keeps_its_partial_folder(tmp_path):
    class Resumable(Demo):
        resumable: ClassVar[bool] = True

    logs: list[str] = []
    store = _store(tmp_path, logs)
    stage = Stage(Resumable, Demo.Config(6))
    partial = store.partial_path(stage)
    partial.mkdir(parents=True)
    (partial / "shard-0").write_text("done before the kill")
    store.run(stage, lambda out: {"kept": (out / "shard-0").read_text()})
    assert store.load(stage)["record"] == {"kept": "done before the kill"}
    assert f"[resume] {stage.id}: continuing the partial folder" in logs


def test_dropped_artifacts_make_stage_not_done(tmp_path):
    store = _store(tmp_path)
    stage = Stage(Demo, Demo.Config(7))

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


# --------------------------------------------------------------------------- claims


def test_a_second_process_waits_for_the_stage_and_reuses_it(tmp_path):
    """Two stores on one runs/ ask for the same stage at once: it is computed once, both get it."""
    stage = Stage(Demo, Demo.Config(8))
    started, calls, logs = threading.Event(), [], []

    def slow(out):
        calls.append(1)
        started.set()
        time.sleep(1.5)
        return _write(out)

    first = threading.Thread(target=lambda: _store(tmp_path).run(stage, slow))
    first.start()
    started.wait(10)
    meta = _store(tmp_path, logs).run(stage, slow)
    first.join()
    assert calls == [1] and meta["record"] == {"n": 1}
    assert logs[0].startswith(f"[wait] {stage.id} is being computed by ") and logs[-1] == f"[cached] {stage.id}"


def test_a_dead_holders_claim_and_partial_folder_are_taken_over(tmp_path):
    stage = Stage(Demo, Demo.Config(9))
    store = _store(tmp_path)
    # a holder that died (SIGKILL) mid-stage: its claim file and half-written partial folder stay behind
    code = (
        "import sys; from benchmark.stages.claims import Claims; from pathlib import Path\n"
        "c = Claims(ttl=60).acquire(Path(sys.argv[1])); print(c.path)\n"
    )
    dead = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "demo" / f".{stage.id}")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert dead.returncode == 0, dead.stderr
    assert Path(dead.stdout.strip()).exists()
    partial = store.partial_path(stage)
    partial.mkdir(parents=True)
    (partial / "half.txt").write_text("half")
    logs: list[str] = []
    _store(tmp_path, logs).run(stage, _write)  # no waiting for the 60 s TTL: the pid is gone
    assert any(
        m.startswith(f"[claim] .{stage.id}".replace("[claim] .", "[claim] ")) and "no longer running" in m for m in logs
    )
    assert any(m.startswith(f"[clean] {stage.id}: removed the partial folder left by ") for m in logs)
    assert not (store.path(stage) / "half.txt").exists()
    assert not list((tmp_path / "demo").glob(".*"))


def test_a_silent_holder_on_another_machine_expires_after_the_ttl(tmp_path):
    from benchmark.stages.claims import Claims

    base = tmp_path / ".demo-x"
    base.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{base}.claim.0").write_text(json.dumps({"host": "elsewhere", "boot": "b", "pid": 1, "beat": 0}))
    claims = Claims(log=lambda m: None, ttl=0.3)
    assert claims.acquire(base) is None  # first sight: alive until its heartbeat stays still for the TTL
    time.sleep(0.4)
    claim = claims.acquire(base)
    assert claim is not None and claim.generation == 1 and claim.previous == "elsewhere:1"
    claim.check()
    claim.release()
    assert not list(tmp_path.glob(".demo-x.claim.*"))


def test_a_superseded_holder_does_not_publish(tmp_path):
    from benchmark.stages.claims import Claims

    base = tmp_path / ".demo-y"
    base.parent.mkdir(parents=True, exist_ok=True)
    mine = Claims(log=lambda m: None, ttl=60).acquire(base)
    Path(f"{base}.claim.{mine.generation + 1}").write_text("{}")  # someone took us for dead
    with pytest.raises(BenchmarkError, match="lost the claim"):
        mine.check()
    mine.release()
