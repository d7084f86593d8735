"""The note session id: one per process start, in the seed's `YYYYMMDD_HHMMSS_PID_RANDOM` format.

A "session" in the seed is one program run. Here it is one web or worker process: every note a
process writes carries the same id, so the prompt can tell the model which notes come from its
own run (`[CURRENT SESSION]`) and which from earlier ones. A forked child (a Celery prefork
worker) gets a new id because its pid differs.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime

_session: tuple[int, str] | None = None


def new_session_id(*, now: datetime | None = None, pid: int | None = None) -> str:
    now = now or datetime.now(UTC)
    pid = os.getpid() if pid is None else pid
    return f"{now:%Y%m%d_%H%M%S}_{pid}_{secrets.randbelow(1000):03d}"


def current_session_id() -> str:
    """This process's session id (created on first use, re-created after a fork)."""
    global _session
    pid = os.getpid()
    if _session is None or _session[0] != pid:
        _session = (pid, new_session_id(pid=pid))
    return _session[1]
