"""Start the Procfile's process types exactly as docs/deployment.md tells an operator to, for
the production browser test and the load benchmark (devtools/benchmarks/load.py).

Only the standard library is used; Django is not imported (the processes are separate)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PROCFILE = ROOT / "Procfile"
# Variables of the test/CI process that must not leak into a production process.
_DROP = (
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "EVENTS_REDIS_URL",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
)


def procfile_commands(path: Path = PROCFILE) -> dict[str, str]:
    """`{process type: command}` of a Procfile (`name: command` lines)."""
    commands: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, command = line.partition(":")
        commands[name.strip()] = command.strip()
    return commands


def free_port() -> int:
    """A free TCP port above 20000 on 127.0.0.1 (never 8000)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port > 20000:
            return port
    raise RuntimeError("no free port above 20000")


def process_env(overrides: Mapping[str, str]) -> dict[str, str]:
    """The environment of a Procfile process: this one's, minus test-only settings, with the
    virtualenv's bin first on PATH (gunicorn, celery, python), plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def run_release(env: Mapping[str, str], timeout: float = 300) -> str:
    """Run the Procfile's `release` command (migrate + collectstatic); returns its output."""
    done = subprocess.run(
        ["sh", "-c", procfile_commands()["release"]],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"release failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def start(kind: str, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start one process type (its own process group, output to `log`)."""
    handle = log.open("ab")
    return subprocess.Popen(
        ["sh", "-c", procfile_commands()[kind]],
        cwd=ROOT,
        env=dict(env),
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM the process group (gunicorn/celery shut down gracefully), then SIGKILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


def wait_for_http(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60):
    """Wait until `url` answers (any HTTP status); fail early if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited ({process.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout} s:\n{log.read_text()[-4000:]}")


def cpu_seconds(pgid: int) -> float:
    """User + system CPU of every live process in a process group."""
    return sum(cpu_split(pgid))


@dataclass(frozen=True)
class GroupProcess:
    pid: int
    ppid: int
    command: str  # its command line, arguments joined by spaces
    niceness: int
    user: float  # CPU seconds
    system: float


def group_processes(pgid: int) -> list[GroupProcess]:
    """Every live process in a process group, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(Path(f"/proc/{entry}/stat"))
            if int(fields[2]) != pgid:  # pgrp
                continue
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        found.append(
            GroupProcess(
                pid=int(entry),
                ppid=int(fields[1]),
                command=command.replace(b"\0", b" ").decode(errors="replace").strip(),
                niceness=int(fields[16]),
                user=int(fields[11]) / tick,
                system=int(fields[12]) / tick,
            )
        )
    return found


def _stat_fields(path: Path) -> list[str]:
    """The fields of a /proc stat file after the command name (which may hold spaces): state
    first, so utime and stime are [11] and [12]."""
    raw = path.read_text()
    return raw[raw.rindex(")") + 2 :].split()


def main_thread_cpu_seconds(pgid: int) -> float:
    """User + system CPU of the main thread of every live process in a process group: a
    uvicorn worker's event loop, a Celery worker's consumer (the rest is their thread pools)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for process in group_processes(pgid):
        try:
            fields = _stat_fields(Path(f"/proc/{process.pid}/task/{process.pid}/stat"))
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cpu_split(pgid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of every live process in a process group."""
    processes = group_processes(pgid)
    return sum(p.user for p in processes), sum(p.system for p in processes)
