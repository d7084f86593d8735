"""A local OpenAI-compatible model for the load benchmark: apps/core/testing/fake_llm.py in its
own process, answering every step after LATENCY seconds with a short, confident reply (one call per
adaptive turn). A customer message containing "[slow]" makes each call take 10 × LATENCY — the
wall time of a slow ten-call deliberative turn. A streamed request (`stream: true`) gets its
first token after FIRST_TOKEN seconds and each next (4 characters) after TOKEN seconds; the
reply is written in the order the schema asks for (the text last). Prints its base URL, then
serves until killed.

    .venv/bin/python benchmarks/fake_model.py 1.0 [FIRST_TOKEN TOKEN]
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
    "tool_call": None,
    "tool_params": {},
    "confidence": 9,
    "missing_params": [],
    "is_destructive": False,
    "needs_confirmation": False,
    "needs_more_context": [],
    "response": "We ship within one business day; standard delivery takes 3-7 days.",
}


def reply_tokens() -> int:
    """The streamed answer's tokens (4 characters each)."""
    return -(-len(fake_llm.json.dumps(ANSWER, ensure_ascii=False)) // 4)


def tokens_before_first_word() -> int:
    """How many tokens the model writes after its first before the one that holds the reply
    text's first character (the deciding fields come first), in the server's 4-character
    tokens of the serialized answer: its first word is on screen no sooner than
    latency + FIRST_TOKEN + this × TOKEN."""
    text = fake_llm.json.dumps(ANSWER, ensure_ascii=False)
    opening = '"response": "'
    return (text.index(opening) + len(opening)) // 4


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    first_token = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    token = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    # 100+ turns connect at once: a deeper accept queue than socketserver's default of 5.
    fake_llm._ThreadingServer.request_queue_size = 1024
    server = fake_llm.FakeLLMServer(
        latency=latency, first_token_seconds=first_token, token_seconds=token
    )

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
