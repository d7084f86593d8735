"""CPU_AFFINITY=spread (apps/platform/affinity.py): each web or worker process takes a core no
other live process of its kind holds and pins every thread to it, threads started later
included; with every core taken it stays unpinned; a process that ends frees its core; off (the
default) changes nothing. Run in child processes (two cores of this box), so the test process
itself is never pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from apps.platform import affinity
from tests.conftest import ROOT
from tests.core.helpers import run_python

ALLOWED = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two cores and Linux affinity")

# A process of `role`: a thread already running, the claim, a thread started after it; prints the
# core and every thread's allowed cores, then holds its claim until its stdin closes.
CHILD = """
import json, os, sys, threading, time
from pathlib import Path
from django.conf import settings
settings.configure(CPU_AFFINITY="spread")
from apps.platform import affinity
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
core = affinity.claim(sys.argv[1], lock_dir=Path(sys.argv[2]))
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
masks = [sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")]
print(json.dumps({"core": core, "masks": masks}), flush=True)
sys.stdin.read()
"""


class Child:
    def __init__(self, role: str, lock_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, role, str(lock_dir)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, ALLOWED),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the child process printed nothing"
        report = json.loads(line)
        self.core: int | None = report["core"]
        self.masks: list[list[int]] = report["masks"]

    def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def children(tmp_path):
    started: list[Child] = []

    def start(role: str) -> Child:
        started.append(Child(role, tmp_path))
        return started[-1]

    yield start
    for child in started:
        if child.process.poll() is None:
            child.end()


def test_each_process_of_a_kind_takes_a_core_of_its_own(children) -> None:
    first, second = children("web"), children("web")

    assert {first.core, second.core} == set(ALLOWED)
    for child in (first, second):
        assert len(child.masks) >= 3  # main thread, one started before, one after
        assert all(mask == [child.core] for mask in child.masks)

    third = children("web")  # every core held: left to the kernel
    assert third.core is None
    assert all(mask == ALLOWED for mask in third.masks)

    worker = children("worker")  # another kind spreads over the cores on its own
    assert worker.core == ALLOWED[0]

    first.end()  # a process that ends frees its core at once
    assert children("web").core == first.core


def test_off_by_default_leaves_the_process_where_the_kernel_puts_it(tmp_path) -> None:
    assert affinity.claim("web", lock_dir=tmp_path) is None
    assert list(tmp_path.iterdir()) == []
    with override_settings(CPU_AFFINITY="off"):
        assert affinity.claim("worker", lock_dir=tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_lock_file_that_cannot_be_opened_leaves_the_process_unpinned(tmp_path) -> None:
    """Another user's file, a link or anything else in the way in the shared directory: the
    process starts unpinned instead of failing (here in this process: nothing gets pinned)."""
    before = os.sched_getaffinity(0)
    for core in sorted(before):
        (tmp_path / f"guidedesk-web-cpu{core}.lock").mkdir()  # cannot be opened as a file

    with override_settings(CPU_AFFINITY="spread"):
        assert affinity.claim("web", lock_dir=tmp_path) is None

    assert os.sched_getaffinity(0) == before
    assert affinity._held == []


def test_an_unknown_mode_stops_the_process_at_start() -> None:
    def start(mode: str) -> subprocess.CompletedProcess[str]:
        environment = {
            "PATH": os.environ.get("PATH", ""),
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "CPU_AFFINITY": mode,
        }
        return run_python("import django; django.setup()", environment, timeout=120)

    done = start("everywhere")
    assert done.returncode != 0
    assert ImproperlyConfigured.__name__ in done.stderr
    assert "CPU_AFFINITY must be 'off' or 'spread'" in done.stderr
    assert start("Spread").returncode == 0
