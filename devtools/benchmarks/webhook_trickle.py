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
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.fake_llm import BackgroundHTTPServer, RequestHandler  # noqa: E402


class TricklingServer(BackgroundHTTPServer):
    """Answers every request with its headers at once, then one body byte every 2 s."""

    def handle_request(self, handler: RequestHandler) -> None:
        handler.read_body()
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.flush()
        for _ in range(1000):
            if not self.sleep(2.0):
                return
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:  # the client hung up: what a limit does
                return


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from apps.core.deadlines import deadline_scope
    from apps.tools.executors.webhook import attempts_budget, run_webhook
    from apps.tools.models import ClientTool

    server = TricklingServer().start()
    url = f"{server.origin}/hook"
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
    server.stop()


if __name__ == "__main__":
    main()
