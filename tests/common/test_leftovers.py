"""The leftover sweeper keeps the scratch of a live writer in any PID namespace: a held ``flock``, not a pid, says
that a writer still works in a folder (two containers share a host name and a boot and see each other's pids as
gone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmark.common import leftovers
from benchmark.common.leftovers import HOST, sweep_leftovers

#: a writer in another process that holds a scratch folder as the harness's writers do, until stdin closes
WRITER = (
    "import sys\nfrom benchmark.common.leftovers import hold\nhold(sys.argv[1])\nprint('held', flush=True)\n"
    "sys.stdin.read()\n"
)


def _gone_pid() -> int:
    """A pid no process of this namespace has: how a live writer of another PID namespace looks from here."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_scratch_whose_lock_is_held_is_kept_whatever_its_pid_says(tmp_path: Path) -> None:
    name = f".export.tmp-{_gone_pid()}-{HOST}"
    scratch = tmp_path / name
    scratch.mkdir()
    (scratch / "model.safetensors").write_bytes(b"half written")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(scratch)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "held\n"
        assert sweep_leftovers(tmp_path) == []  # the pid looks gone, the lock says the writer lives
        assert (scratch / "model.safetensors").read_bytes() == b"half written"
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait()
    assert sweep_leftovers(tmp_path) == [name]  # the kernel dropped the lock with its holder
    assert not scratch.exists()


def test_scratch_of_a_gone_writer_without_a_lock_is_removed_and_a_live_pids_is_kept(tmp_path: Path) -> None:
    gone, live = tmp_path / f".a.partial-{_gone_pid()}-{HOST}", tmp_path / f".b.partial-1-{HOST}"
    gone.mkdir()
    live.mkdir()  # pid 1 lives in every namespace
    assert sweep_leftovers(tmp_path) == [gone.name]
    assert live.is_dir()


def test_an_export_holds_its_scratch_folder_while_it_writes(tmp_path: Path, monkeypatch) -> None:
    from benchmark.report import model_export

    seen: list[bool] = []

    def save(model_dir: Path, out: Path, tmp: Path, *args: object) -> Path:
        seen.append(leftovers._held(tmp))
        return out

    monkeypatch.setattr(model_export, "_save_sparse_encoder", save)
    out = tmp_path / "exports" / "m"
    out.parent.mkdir()
    model_export.save_sparse_encoder(tmp_path, out, max_seq_length=8, card="")
    assert seen == [True]
    assert leftovers._HELD == {}  # released when the export ends
    assert list(out.parent.iterdir()) == []  # its scratch removed (the stand-in wrote nothing into place)
