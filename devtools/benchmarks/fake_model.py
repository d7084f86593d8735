"""A local OpenAI-compatible model for the load benchmark: devtools/fake_llm.py in its
own process, answering every step after LATENCY seconds with a short, confident reply (one call per
adaptive turn). A customer message containing "[slow]" makes each call take 10 × LATENCY — the
wall time of a slow ten-call deliberative turn. A streamed request (`stream: true`) gets its
first token after FIRST_TOKEN seconds and each next (4 characters) after TOKEN seconds; the
reply is written in the order the schema asks for (the text last). Prints its base URL, then
serves until killed.

With MARKS (a file), each streamed reply appends one JSON line: the customer message it
answers, when its request arrived and when the token holding the reply text's first character
was written (wall clock), so `load.py` can tell the model's own lateness from ours.

    .venv/bin/python devtools/benchmarks/fake_model.py 1.0 [FIRST_TOKEN TOKEN [MARKS]]
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from devtools import fake_llm

ANSWER = fake_llm.assess_reply("We ship within one business day; standard delivery takes 3-7 days.")


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


class MarkedServer(fake_llm.FakeLLMServer):
    """The scripted server noting, per streamed reply, when its request arrived and when the
    reply text's first character went out (`MARKS`). Its waits keep to a schedule counted from
    the request's arrival (latency, first token, then one token each TOKEN seconds), as a
    provider's would: each relative sleep overshoots a little on a busy box, and 40 of them
    would make the model itself ~20 ms late to its first word."""

    def __init__(self, marks: Path, **options: Any) -> None:
        super().__init__(**options)
        self.marks = marks
        self.arrived = threading.local()
        self.marks_lock = threading.Lock()

    def _chat_completion(self, raw: bytes, headers: dict[str, str]) -> Any:
        self.arrived.at = time.time()
        self.arrived.due = time.monotonic()
        return super()._chat_completion(raw, headers)

    def sleep(self, seconds: float) -> bool:
        """Until `seconds` after the previous wait of this request was due (not after now)."""
        due = getattr(self.arrived, "due", None)
        if due is None:
            return super().sleep(seconds)
        self.arrived.due = due = due + max(seconds, 0.0)
        return super().sleep(due - time.monotonic())

    def _streamed(self, request: Any, completion: dict[str, Any], content: str) -> Any:
        response = super()._streamed(request, completion, content)
        arrived = getattr(self.arrived, "at", None)
        last_user = [m for m in request.messages if m.get("role") == "user"]
        message = fake_llm.message_text(last_user[-1]) if last_user else ""
        # The role chunk, then one chunk per token: the first word is in chunk 1 + this.
        first_word_chunk = 1 + tokens_before_first_word() if content == _ANSWER_TEXT else None

        def marked(chunks: Iterator[bytes]) -> Iterator[bytes]:
            word_at = None
            for index, chunk in enumerate(chunks):
                yield chunk  # resumes once it has been written
                if index == first_word_chunk:
                    word_at = time.time()
            line = json.dumps({"message": message, "arrived": arrived, "word_sent": word_at})
            with self.marks_lock, self.marks.open("a") as out:
                out.write(line + "\n")

        assert response.stream is not None
        return dataclasses.replace(response, stream=marked(response.stream))


_ANSWER_TEXT = fake_llm.json.dumps(ANSWER, ensure_ascii=False)


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    first_token = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    token = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    marks = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    # 100+ turns connect at once: a deeper accept queue than socketserver's default of 5.
    fake_llm._ThreadingServer.request_queue_size = 1024
    options: dict[str, Any] = {
        "latency": latency,
        "first_token_seconds": first_token,
        "token_seconds": token,
    }
    server = (
        MarkedServer(marks, **options) if marks is not None else fake_llm.FakeLLMServer(**options)
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
