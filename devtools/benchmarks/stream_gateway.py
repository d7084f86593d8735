"""CPU of one streamed model call in the gateway (`llm_complete` inside `streaming(sink)`)
against one without streaming: the real `openai` SDK client and the scripted server at zero
latency, the load benchmark's answer (devtools/benchmarks/fake_model.py). CPU is this thread's own
(`time.thread_time`: the server's threads are not in it), median of `--calls` after 30 warm-up
calls. Throwaway SQLite database.

    .venv/bin/python devtools/benchmarks/stream_gateway.py [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "devtools" / "benchmarks"))

from devtools.benchmarks.bench_setup import throwaway_django  # noqa: E402

MESSAGES = [
    {"role": "system", "content": "You are the support assistant for a shop."},
    {"role": "user", "content": "When do you ship?"},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with throwaway_django("guidedesk-stream-gateway-"):
        bench(args)


def bench(args: argparse.Namespace) -> None:
    from django.test.utils import override_settings
    from fake_model import ANSWER

    from apps.reasoning.llm import llm_complete, streaming
    from apps.reasoning.steps.assess import AssessOut
    from devtools.fake_llm import FakeLLMServer

    sys.stdout.write("| call | CPU ms per call (median) |\n")
    sys.stdout.write("|---|---:|\n")
    with FakeLLMServer() as server:
        server.fallback(lambda request: ANSWER)
        with override_settings(
            OPENAI_API_KEY="bench-key",
            OPENAI_BASE_URL=server.base_url,
            LLM_RESPONSE_FORMAT="json_schema",
        ):
            for name, sink in (("streamed (a sink)", lambda partial: True), ("not streamed", None)):
                spent = []
                for n in range(30 + args.calls):
                    started = time.thread_time()
                    with streaming(sink):
                        llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
                    if n >= 30:
                        spent.append(time.thread_time() - started)
                sys.stdout.write(f"| {name} | {statistics.median(spent) * 1000:.1f} |\n")


if __name__ == "__main__":
    main()
