"""Claims: two processes never compute the same stage at once, on one machine or across machines
that share ``runs/`` (NFS included).

A claim is a file ``runs/<kind>/.<id>.claim.<g>`` created with ``O_CREAT | O_EXCL``, which is atomic
on local filesystems and on NFS (v3 and later): of two processes creating the same name, exactly one
succeeds. The file holds the holder (host, boot id, pid, process start time) and a heartbeat counter
that a thread of the holder rewrites every ``ttl / 4`` seconds. The holder is whoever created the
highest generation ``g``.

A claim is stale when its holder is provably dead (same host and boot: the pid is gone or belongs to
another process) or, for a holder on another machine, when its heartbeat has not changed for
``ttl`` seconds of the observer's own clock (no clock is compared across machines). A stale claim
is superseded by creating generation ``g + 1``, again with ``O_EXCL``, so only one successor wins.
A superseded holder that is in fact alive finds the higher generation before it publishes and gives
up (``Claim.check``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError

TTL_ENV = "BENCHMARK_CLAIM_TTL"
DEFAULT_TTL = 120.0  # seconds without a heartbeat before a holder on another machine counts as dead
SUFFIX = ".claim."


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid from the original)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 of proc(5), counted after the command name


HOST = socket.gethostname()
BOOT = _boot_id()


def identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": HOST, "boot": BOOT, "pid": pid, "start": _start_time(pid), "token": uuid.uuid4().hex}


def describe_holder(info: dict[str, Any] | None) -> str:
    return f"{info.get('host')}:{info.get('pid')}" if info else "another process"


def _alive(info: dict[str, Any]) -> bool | None:
    """True/False for a holder on this machine, None when it runs elsewhere (use the heartbeat)."""
    if info.get("host") != HOST or info.get("boot") != BOOT:
        return None
    pid = int(info.get("pid", -1))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    start = _start_time(pid)
    return start is not None and (info.get("start") is None or start == info.get("start"))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class Claim:
    """A held claim: heartbeats until released."""

    def __init__(
        self, path: Path, base: Path, generation: int, info: dict[str, Any], ttl: float, previous: str | None
    ) -> None:
        self.path, self.base, self.generation, self.info, self.ttl = path, base, generation, info, ttl
        self.previous = previous  # the dead holder this claim superseded, for messages
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="claim-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        beat = 0
        while not self._stop.wait(self.ttl / 4):
            beat += 1
            try:
                with open(self.path, "r+", encoding="utf-8") as fh:
                    fh.write(json.dumps({**self.info, "beat": beat}))
                    fh.truncate()
            except OSError:
                return  # superseded and cleaned up; check() will say so

    def check(self) -> None:
        """Raise if this claim was superseded (its holder was taken for dead): do not publish."""
        newer = [g for g in _generations(self.base) if g > self.generation]
        if newer or not self.path.exists():
            raise BenchmarkError(
                f"lost the claim on {self.base.name[1:]}: another process took this stage over "
                f"after {self.ttl:g}s without a heartbeat; rerun the same command to reuse its result"
            )

    def release(self) -> None:
        self._stop.set()
        for g in _generations(self.base):
            if g <= self.generation:
                try:
                    Path(f"{self.base}{SUFFIX}{g}").unlink()
                except OSError:
                    pass


def _generations(base: Path) -> list[int]:
    prefix = base.name + SUFFIX
    try:
        names = os.listdir(base.parent)
    except OSError:
        return []
    return sorted(int(n[len(prefix) :]) for n in names if n.startswith(prefix) and n[len(prefix) :].isdigit())


class Claims:
    """Acquires claims; remembers what it saw of other holders' heartbeats."""

    def __init__(self, log: Callable[[str], None] = print, ttl: float | None = None) -> None:
        self.log = log
        self.ttl = float(ttl if ttl is not None else os.environ.get(TTL_ENV, DEFAULT_TTL))
        self._seen: dict[str, tuple[str, float]] = {}  # claim file → (its content, when first seen so)

    def _stale(self, path: Path, info: dict[str, Any] | None, raw: str) -> bool:
        alive = _alive(info) if info else None
        if alive is not None:
            return not alive
        now = time.monotonic()
        content, since = self._seen.get(str(path), (None, now))
        if content != raw:
            self._seen[str(path)] = (raw, now)
            return False
        return now - since > self.ttl

    def holder_of(self, base: Path) -> str:
        gens = _generations(base)
        return describe_holder(_read(Path(f"{base}{SUFFIX}{gens[-1]}")) if gens else None)

    def acquire(self, base: Path) -> Claim | None:
        """A claim on the stage whose files start with ``base``, or None while a live holder has it."""
        base.parent.mkdir(parents=True, exist_ok=True)
        gens = _generations(base)
        previous = None
        if gens:
            top = Path(f"{base}{SUFFIX}{gens[-1]}")
            try:
                raw = top.read_text(encoding="utf-8")
            except OSError:
                return None  # released meanwhile: look again
            info = _read(top)
            if not self._stale(top, info, raw):
                return None
            previous = describe_holder(info)
        generation = gens[-1] + 1 if gens else 0
        info = identity()
        path = Path(f"{base}{SUFFIX}{generation}")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return None  # another process won this generation
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({**info, "beat": 0}))
            fh.flush()
            os.fsync(fh.fileno())
        if previous:
            self.log(f"[claim] {base.name[1:]}: took over from {previous}, which is no longer running")
        return Claim(path, base, generation, info, self.ttl, previous)
