"""Running a reader of `apps/knowledge/extract_child.py` in a child process with hard limits.

A PDF (or a large HTML page) can take minutes of CPU to read; in a worker thread that time is
the whole process's (the interpreter lock), no deadline interrupts it, and Celery's time
limits do not reach a thread pool. So the reading runs in a fresh interpreter:

- CPU seconds (KNOWLEDGE_EXTRACT_CPU_SECONDS, RLIMIT_CPU) and address space
  (KNOWLEDGE_EXTRACT_MEMORY_MB, RLIMIT_AS) are limited by the child on itself before it
  imports anything heavy (`preexec_fn` is not safe in a threaded worker);
- the parent kills it after KNOWLEDGE_EXTRACT_SECONDS of wall-clock time (or when the
  enclosing deadline, the sync's, runs out) and when its output passes
  KNOWLEDGE_EXTRACT_OUTPUT_BYTES;
- every POLL_SECONDS the parent asks `still_wanted()` (the sync: is the source still there and
  unchanged?) and kills the child when the answer is no (ExtractionStopped).

The parent only waits on pipes meanwhile, so its own thread uses next to no CPU. A limit that
is hit raises ReaderError with a translated message saying which one."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from apps.core import deadlines
from apps.knowledge.extract_child import MEMORY_EXIT

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
_ROOT = Path(__file__).resolve().parents[2]  # the directory `apps` lives in
_STDERR_KEPT = 2000


class ReaderError(Exception):
    """The child was stopped at a limit or failed; the message (translated) says which."""


class ExtractionStopped(Exception):
    """`still_wanted()` said no: the child was killed and there is no result."""


@dataclass
class ChildRun:
    """What one child did (kept for logs, tests and the benchmark)."""

    pid: int = 0
    returncode: int | None = None
    cpu_seconds: float = 0.0  # the child's user + system CPU time
    max_rss_kb: int = 0
    killed: str = ""  # why the parent killed it: "wall", "output", "stopped"; "" = it ended
    deadline: bool = False  # its wall-clock limit was what was left of the enclosing deadline
    stderr: bytes = b""
    output: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_mb: int
    output_bytes: int
    wall_seconds: float

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            cpu_seconds=int(settings.KNOWLEDGE_EXTRACT_CPU_SECONDS),
            memory_mb=int(settings.KNOWLEDGE_EXTRACT_MEMORY_MB),
            output_bytes=int(settings.KNOWLEDGE_EXTRACT_OUTPUT_BYTES),
            wall_seconds=float(settings.KNOWLEDGE_EXTRACT_SECONDS),
        )


def read_in_child(
    kind: str,
    data: bytes,
    *,
    charset: str = "",
    still_wanted: Callable[[], bool] | None = None,
    limits: Limits | None = None,
    run: ChildRun | None = None,
) -> dict[str, Any]:
    """The reader's JSON result for `data` ("pdf" or "html"), read in a child process under
    `limits` (the settings by default). Raises ReaderError when a limit was hit or the child
    failed, ExtractionStopped when `still_wanted()` turned false. `run`, when given, is
    filled in with what the child did."""
    limits = limits or Limits.from_settings()
    run = run if run is not None else ChildRun()
    wall = limits.wall_seconds
    left = deadlines.remaining()
    if left is not None and left < wall:
        wall, run.deadline = left, True
    command = [
        sys.executable,
        "-m",
        "apps.knowledge.extract_child",
        kind,
        charset,
        str(limits.cpu_seconds),
        str(limits.memory_mb * 1024 * 1024),
    ]
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "PYTHONPATH": str(_ROOT),
        "PYTHONIOENCODING": "utf-8",
        "LANG": "C.UTF-8",
    }
    with tempfile.TemporaryFile() as stdin:
        stdin.write(data)
        stdin.seek(0)
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own module, no shell
                command,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=_ROOT,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            logger.warning("extract child could not start", extra={"error": str(exc)})
            raise ReaderError(
                _("The document could not be read: the reader did not start.")
            ) from exc
        run.pid = proc.pid
        try:
            _watch(proc, run, limits=limits, wall=wall, still_wanted=still_wanted)
        finally:
            if proc.returncode is None:  # an exception of our own: never leave the child
                _kill(proc)
                _reap(proc, run)
    return _result(run, limits=limits, wall=wall)


def _watch(
    proc: subprocess.Popen[bytes],
    run: ChildRun,
    *,
    limits: Limits,
    wall: float,
    still_wanted: Callable[[], bool] | None,
) -> None:
    """Read the child's output until it ends, killing it at a limit or when unwanted."""
    assert proc.stdout is not None
    assert proc.stderr is not None
    started = time.monotonic()
    next_check = started + POLL_SECONDS
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            now = time.monotonic()
            if now - started >= wall:
                run.killed = "wall"
                break
            if still_wanted is not None and now >= next_check:
                next_check = now + POLL_SECONDS
                if not still_wanted():
                    run.killed = "stopped"
                    break
            timeout = min(POLL_SECONDS, max(0.0, started + wall - now))
            for key, _mask in selector.select(timeout):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
            if len(out) > limits.output_bytes:
                run.killed = "output"
                break
            del err[:-_STDERR_KEPT]
    if run.killed:
        _kill(proc)
    _reap(proc, run)
    run.output, run.stderr = bytes(out), bytes(err)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def _reap(proc: subprocess.Popen[bytes], run: ChildRun) -> None:
    """Wait for the child and keep its exit status and resource use."""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # already reaped (it cannot be: Popen did not wait)
        proc.wait()
    else:
        proc.returncode = os.waitstatus_to_exitcode(status)
        run.cpu_seconds = usage.ru_utime + usage.ru_stime
        run.max_rss_kb = usage.ru_maxrss
    run.returncode = proc.returncode


def _result(run: ChildRun, *, limits: Limits, wall: float) -> dict[str, Any]:
    code = run.returncode
    if run.killed == "stopped":
        logger.info("extract child stopped: its source changed", extra={"pid": run.pid})
        raise ExtractionStopped
    if run.killed == "output":
        raise ReaderError(
            _("The document's text is larger than %(bytes)s bytes; reading it was stopped.")
            % {"bytes": limits.output_bytes}
        )
    if run.killed == "wall" and run.deadline:
        raise ReaderError(_("The sync's time limit was reached."))
    if run.killed == "wall":
        raise ReaderError(
            _("The document took more than %(seconds)s seconds to read; it was stopped.")
            % {"seconds": round(wall)}
        )
    xcpu = getattr(signal, "SIGXCPU", None)
    out_of_cpu = code is not None and code < 0 and -code == xcpu
    # The hard limit's SIGKILL (something caught SIGXCPU); another SIGKILL (the kernel's OOM
    # killer, an operator) falls through to "the reader ended with code -9".
    out_of_cpu |= code == -signal.SIGKILL and run.cpu_seconds >= limits.cpu_seconds > 0
    if out_of_cpu:
        raise ReaderError(
            _("The document took more than %(seconds)s CPU seconds to read; it was stopped.")
            % {"seconds": limits.cpu_seconds}
        )
    if code == MEMORY_EXIT or b"MemoryError" in run.stderr:
        raise ReaderError(
            _("The document needed more than %(mb)s MB of memory to read; it was stopped.")
            % {"mb": limits.memory_mb}
        )
    if code != 0:
        logger.warning(
            "extract child failed",
            extra={"returncode": code, "stderr": run.stderr.decode("utf-8", "replace")},
        )
        raise ReaderError(
            _("The document could not be read (the reader ended with code %(code)s).")
            % {"code": code}
        )
    try:
        result = json.loads(run.output)
    except ValueError as exc:
        raise ReaderError(
            _("The document could not be read (the reader ended with code %(code)s).")
            % {"code": code}
        ) from exc
    if not isinstance(result, dict):
        raise ReaderError(
            _("The document could not be read (the reader ended with code %(code)s).")
            % {"code": code}
        )
    return result
