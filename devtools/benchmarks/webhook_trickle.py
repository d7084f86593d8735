"""How long a tool webhook that trickles its reply holds a turn (docs/benchmarks.md).

A local endpoint sends its headers at once and then one body byte every 2 s — every read
succeeds well inside any per-read timeout, so only a wall-clock limit ends the call. The tool
has `timeout_seconds=5` and the default 2 retries; the call is timed once on its own and once
inside a turn deadline of 8 s.

Run from the project root:

    .venv/bin/python devtools/benchmarks/webhook_trickle.py

No database is used (the tool is an unsaved model instance).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def trickling_server(stop: threading.Event) -> str:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

    def serve(conn: socket.socket) -> None:
        with conn:
            request = b""
            try:
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    request += chunk
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                for _ in range(1000):
                    if stop.wait(2.0):
                        return
                    conn.sendall(b" ")
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/hook"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from apps.core.deadlines import deadline_scope
    from apps.tools.executors.webhook import attempts_budget, run_webhook
    from apps.tools.models import ClientTool

    stop = threading.Event()
    url = trickling_server(stop)
    tool = ClientTool(
        name="slow",
        webhook_url=url,
        signing_secret="bench-s3cret",  # noqa: S106, timeout_seconds=5
    )
    out = sys.stdout
    out.write(f"tool: timeout_seconds=5, max_retries=2, budget {attempts_budget(tool):.1f} s\n")
    for label, deadline in [("no turn deadline", None), ("turn deadline 8 s", 8.0)]:
        started = time.monotonic()
        if deadline is None:
            outcome = run_webhook(tool=tool, params={}, conversation_id=None, idempotency_key="k")
        else:
            with deadline_scope(deadline):
                outcome = run_webhook(
                    tool=tool, params={}, conversation_id=None, idempotency_key="k"
                )
        elapsed = time.monotonic() - started
        out.write(
            f"{label}: {elapsed:.2f} s, {outcome.attempts} attempts, "
            f"timed_out={outcome.timed_out}\n"
        )
    stop.set()


if __name__ == "__main__":
    main()
