"""A local OpenAI-compatible model for the load benchmark: apps/core/testing/fake_llm.py in its
own process, answering every step after LATENCY seconds with a short, confident reply (one call per
adaptive turn). A customer message containing "[slow]" makes each call take 10 × LATENCY — the
wall time of a slow ten-call deliberative turn. Prints its base URL, then serves until killed.

    .venv/bin/python benchmarks/fake_model.py 1.0
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.core.testing import fake_llm

ANSWER: dict[str, Any] = {
    "response": "We ship within one business day; standard delivery takes 3-7 days.",
    "confidence": 9,
    "tool_call": None,
    "tool_params": {},
    "missing_params": [],
    "is_destructive": False,
    "needs_confirmation": False,
    "needs_more_context": [],
}


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    # 100+ turns connect at once: a deeper accept queue than socketserver's default of 5.
    fake_llm._ThreadingServer.request_queue_size = 1024
    server = fake_llm.FakeLLMServer(latency=latency)

    def answer(request: fake_llm.RecordedRequest) -> fake_llm.LLMReply:
        last_user = [m for m in request.messages if m.get("role") == "user"]
        text = fake_llm.message_text(last_user[-1]) if last_user else ""
        if "[slow]" in text:
            return fake_llm.Delay(9 * latency, then=ANSWER)
        return ANSWER

    server.fallback(answer)
    server.start()
    sys.stdout.write(server.base_url + "\n")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
