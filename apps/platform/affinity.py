"""One core per process, on a box whose cores the Procfile's processes share (opt-in:
`CPU_AFFINITY=spread`, docs/deployment.md "One core per process").

A `web`, `worker` or `background` process runs Python in one thread at a time (the interpreter
lock), yet the kernel moves its threads between cores: when a burst keeps a hundred turns in
flight, the lock passes from a thread on one core to a thread on the other hundreds of times a
second, and each resumes with cold caches. Pinned, a process's threads take turns on one core
and find its caches warm. In the flash sale on 2 cores (docs/benchmarks.md) that cut the web +
worker CPU of a turn by about a seventh.

`claim(role)` takes the first core of this process's allowed set that no other live process of
the same role holds — an exclusive `flock` on a file per role and core in the temporary
directory, held while the process lives (a process that dies frees its core at once) — and
pins every thread of the process to it; threads started later inherit it. When every core is
held (more processes of a role than cores), the process stays unpinned. The lock files are per
box: processes in separate containers each see their own directory and would all take the
first core, so leave it off there (the default), and where each process type has cores of its
own. Pinning is an optimisation: a lock file that cannot be opened (another user's, a link) or a
core the kernel refuses leaves the process unpinned with a warning, never stops it."""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

_held: list[int] = []  # the lock's file descriptor, open for the process's lifetime


def claim(role: str, *, lock_dir: Path | None = None) -> int | None:
    """Pin this process to a core no other live `role` process holds (CPU_AFFINITY=spread).
    Returns the core, or None: off, one core only, every core taken, or no such call here."""
    if settings.CPU_AFFINITY != "spread" or _held or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    folder = lock_dir or Path(tempfile.gettempdir())
    for core in cores:
        fd = _locked(folder / f"guidedesk-{role}-cpu{core}.lock")
        if fd is None:
            continue
        try:
            pin(core)
        except OSError:
            logger.warning("affinity: core %d refused; this %s process is not pinned", core, role)
            os.close(fd)
            return None
        _held.append(fd)
        logger.info("affinity: this %s process runs on core %d", role, core)
        return core
    logger.info("affinity: every core has a %s process; this one is not pinned", role)
    return None


def _locked(path: Path) -> int | None:
    """An open descriptor of `path` holding its exclusive lock; None when another process holds
    it or the file cannot be opened as ours (no links followed in the shared directory)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        logger.warning("affinity: cannot open %s; that core is passed over", path, exc_info=True)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: another live process holds this core
        os.close(fd)
        return None
    return fd


def pin(core: int) -> None:
    """Every thread of this process on `core` (Linux: a thread's affinity is its own; new
    threads inherit their creator's)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except ProcessLookupError:  # the thread ended meanwhile
            continue
