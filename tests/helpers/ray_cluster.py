"""A real Ray cluster for tests, bound to 127.0.0.1 only: a head and worker nodes started with
``ray start`` inside private network and PID namespaces.

``python tests/helpers/ray_cluster.py SPEC.json`` must run as the first process of those namespaces (see
``namespace()``): it brings the loopback up, starts the nodes, runs SPEC's commands one after
another, writes what each did (exit status, output, wall seconds, and CPU seconds when a cgroup
counts them) to SPEC's ``out``, and
stops every Ray process. A network namespace holds only ``lo``, so Ray cannot swap 127.0.0.1 for a
routable address, and nothing is reachable from outside; the PID namespace (with
``unshare --kill-child``) guarantees that no Ray process outlives the run, whatever happens.

SPEC: {"nodes": [cpus of the head, cpus of each worker…], "commands": [{"name", "argv", "env",
"timeout"}], "out": path, "temp": a short folder for Ray's sockets}.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

PORT = 6380
PREFIXES = (
    ["unshare", "--kill-child", "--net", "--pid", "--mount-proc"],
    ["unshare", "--kill-child", "--map-root-user", "--net", "--pid", "--mount-proc"],  # without root
)


def namespace() -> tuple[list[str] | None, str]:
    """The unshare prefix that works here (and can bring lo up), or None and why not."""
    why = "unshare is not installed"
    for prefix in PREFIXES:
        try:
            proc = subprocess.run(
                [*prefix, sys.executable, __file__, "--probe"], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{' '.join(prefix)}: {exc}"
            continue
        if proc.returncode == 0:
            return prefix, ""
        why = f"{' '.join(prefix)}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    return None, why


def loopback_up() -> None:
    """``ip link set lo up`` without iproute2: SIOCGIFFLAGS, set IFF_UP, SIOCSIFFLAGS."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


def cpu_seconds() -> float | None:
    """CPU seconds used so far by the cgroup v1 cpuacct folder named in $RAY_CLUSTER_CPUACCT, which the
    caller put this namespace in (tests/helpers/ray_measure.py does); None without one. (Per-process sums
    from /proc miss Ray's worker processes: the raylet does not reap them.)"""
    folder = os.environ.get("RAY_CLUSTER_CPUACCT")
    if not folder:
        return None
    return int(Path(folder, "cpuacct.usage").read_text()) / 1e9


#: Ray's own long-lived processes (not the workers that run tasks), by a piece of their command line
DAEMONS = (
    "gcs_server",
    "raylet",
    "log_monitor",
    "autoscaler",
    "dashboard",
    "ray.util.client.server",
    "runtime_env/agent",
    "DashboardAgent",
    "RuntimeEnvAgent",
)


def daemon_cpu_seconds() -> float:
    """CPU seconds used so far by Ray's daemons (GCS, raylets, agents, monitors) of this namespace."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if any(d in cmdline for d in DAEMONS):
            total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _ray(*args: str, env: dict[str, str]) -> None:
    ray = str(Path(sys.executable).with_name("ray"))
    proc = subprocess.run([ray, *args], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-3000:]}")


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    loopback_up()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    report: dict[str, object] = {"commands": []}
    start, cpu0 = time.perf_counter(), cpu_seconds()
    common = ["--disable-usage-stats", "--object-store-memory", str(100 * 2**20)]
    try:
        head, *workers = spec["nodes"]
        _ray(
            "start",
            "--head",
            f"--port={PORT}",
            f"--num-cpus={head}",
            "--num-gpus=0",
            "--include-dashboard=false",
            f"--temp-dir={spec['temp']}",
            *common,
            env=env,
        )
        for cpus in workers:
            _ray("start", f"--address=127.0.0.1:{PORT}", f"--num-cpus={cpus}", "--num-gpus=0", *common, env=env)
        report["startup"] = {"wall": time.perf_counter() - start, "cpu": _minus(cpu_seconds(), cpu0)}
        for command in spec["commands"]:
            t0, c0, d0 = time.perf_counter(), cpu_seconds(), daemon_cpu_seconds()
            try:
                proc = subprocess.run(
                    command["argv"],
                    env={**env, **command.get("env", {})},
                    capture_output=True,
                    text=True,
                    timeout=command.get("timeout", 600),
                )
                rc, out, err = proc.returncode, proc.stdout, proc.stderr
            except subprocess.TimeoutExpired as exc:
                rc, out, err = "timeout", str(exc.stdout or ""), str(exc.stderr or "")
            report["commands"].append(
                {
                    "name": command["name"],
                    "rc": rc,
                    "stdout": out,
                    "stderr": err,
                    "wall": time.perf_counter() - t0,
                    "cpu": _minus(cpu_seconds(), c0),
                    "daemon_cpu": daemon_cpu_seconds() - d0,
                }
            )
    except Exception as exc:  # reported to the test, which fails with it
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        subprocess.run(
            [str(Path(sys.executable).with_name("ray")), "stop", "--force"], env=env, capture_output=True, timeout=120
        )  # sees this namespace's processes only
        Path(spec["out"]).write_text(json.dumps(report))
    return 0


def run(prefix: list[str], spec: dict[str, object], spec_path: Path, timeout: float) -> dict[str, object]:
    """Start the namespace, the cluster and the commands; what happened (see the module doc)."""
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [*prefix, sys.executable, __file__, str(spec_path)], capture_output=True, text=True, timeout=timeout
    )
    try:
        return json.loads(Path(str(spec["out"])).read_text())
    except (OSError, ValueError):
        raise RuntimeError(f"the cluster run left no report (exit {proc.returncode}): {proc.stderr[-3000:]}") from None


if __name__ == "__main__":
    if sys.argv[1] == "--probe":
        loopback_up()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
