"""On a box the Procfile's processes share, the web process comes first: `worker` runs at a
lower CPU priority (`nice`, WORKER_NICENESS, default 10) and `background` at the lowest
(BACKGROUND_NICENESS, 19). Checked on the real processes the Procfile's lines start
(docs/deployment.md, "Process priorities")."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support import procfile


def _celery_niceness(kind: str, tmp_path: Path, **overrides: str) -> int:
    """Start the Procfile's `kind`; return its Celery process's niceness once it runs, then
    stop it (it never needs its broker for that)."""
    env = procfile.process_env(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
            **overrides,
        }
    )
    log = tmp_path / f"{kind}.log"
    process = procfile.start(kind, env, log)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            for found in procfile.group_processes(process.pid):
                program = Path(found.command.split(" ", 1)[0]).name
                # not `sh -c …` nor `nice …` before it execs: Celery itself
                if program.startswith("python") or program == "celery":
                    return found.niceness
            time.sleep(0.05)
        raise AssertionError(f"no Celery process:\n{log.read_text()[-2000:]}")
    finally:
        procfile.stop(process)


@pytest.mark.parametrize(
    ("kind", "variable", "shipped"),
    [("worker", "WORKER_NICENESS", 10), ("background", "BACKGROUND_NICENESS", 19)],
)
def test_worker_processes_run_below_the_web_process(tmp_path, monkeypatch, kind, variable, shipped):
    monkeypatch.delenv(variable, raising=False)
    ours = os.nice(0)  # `nice -n N` adds N to the niceness it inherits, up to 19
    assert _celery_niceness(kind, tmp_path) == min(ours + shipped, 19)
    assert _celery_niceness(kind, tmp_path, **{variable: "0"}) == ours


def test_the_web_line_keeps_the_priority_it_is_started_with():
    assert "nice" not in procfile.procfile_commands()["web"].split()
