"""What the README's demo conversation spends in tokens, per turn and in all, with the offline
demo model (docs/benchmarks.md, "Tokens of the README's demo conversation") — the figure the
widget's token windows (`THROTTLE_WIDGET_TOKENS`, `THROTTLE_WIDGET_ADDRESS_TOKENS`) are sized
from.

The demo tenant (demo/tenant.json) in a throwaway SQLite file, its plan switched to the mode
given, signed in as the demo customer like the shop page; the README's "Try it" messages sent
through the widget API (Django's test client, every throttle, with the token windows off so
that nothing is held back) in one conversation, each turn run eagerly by the offline demo model.

    .venv/bin/python devtools/benchmarks/demo_tokens.py [--mode deliberative|adaptive|as_needed]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import (  # noqa: E402
    throwaway_django,
    widget_send,
    widget_start,
)

ORIGIN = "https://bench.example"
ADDRESS = "198.51.100.77"
# The README's "Try it" and "Deliberative mode" messages, in the order a visitor tries them.
MESSAGES = [
    "Cancel my order",
    "Order 12345",
    "Yes",
    "What is your return policy?",
    "Where is TH-10042?",
    "Do you offer gift cards?",
    "Can I return boots after 40 days?",
    "Should I get a refund or an exchange?",
]


def run(mode: str, *, plan_limits: bool = True) -> list[dict[str, Any]]:
    from django.conf import settings
    from django.test import Client as HttpClient
    from django.test.utils import override_settings

    from apps.api.views import DEMO_CUSTOMER_ID
    from apps.clients.identity import identity_secret_generate, user_hash
    from apps.clients.models import Client
    from apps.provisioning.management.commands.import_client import read_tenant_file
    from apps.provisioning.services import tenant_import
    from apps.reasoning.models import ReasoningTrace

    imported = tenant_import(data=read_tenant_file(str(ROOT / "demo" / "tenant.json")))
    client = Client.objects.get(slug=imported[0].slug)
    client.allowed_origins = [ORIGIN]
    if not client.identity_secret:
        client.identity_secret = identity_secret_generate()
    client.save()
    plan = client.plan
    plan.ai_mode = mode
    if not plan_limits:
        plan.conversation_token_budget = plan.visitor_daily_token_budget = 0
        plan.deliberative_turns_per_hour = 0
    plan.save()
    rest: dict[str, Any] = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {
        **rest["DEFAULT_THROTTLE_RATES"],
        "widget_tokens": None,
        "widget_address_tokens": None,
    }
    http = HttpClient(headers={"Origin": ORIGIN, "X-Widget-Key": client.widget_key})
    rows = []
    with override_settings(REST_FRAMEWORK=rest):
        started = widget_start(
            http,
            {
                "customer_id": DEMO_CUSTOMER_ID,
                "user_hash": user_hash(client.identity_secret, DEMO_CUSTOMER_ID),
            },
            REMOTE_ADDR=ADDRESS,
        )
        for text in MESSAGES:
            response = widget_send(http, started, text, REMOTE_ADDR=ADDRESS)
            assert response.status_code == 201, response.content
            trace = (
                ReasoningTrace.objects.filter(client=client, user_message__text=text)
                .order_by("-pk")
                .first()
            )
            cap = trace.steps.filter(name="deliberative_cap").first() if trace else None
            rows.append(
                {
                    "text": text,
                    "mode": trace.mode if trace else "-",
                    "capped": (cap.output or {}).get("reason", "") if cap else "",
                    "calls": trace.llm_calls if trace else 0,
                    "tokens": trace.prompt_tokens + trace.completion_tokens if trace else 0,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="deliberative")
    parser.add_argument(
        "--no-plan-limits",
        action="store_true",
        help="the plan's per-conversation and per-visitor limits off: every turn runs its mode",
    )
    args = parser.parse_args()
    with throwaway_django("guidedesk-demo-tokens-"):
        bench(args)


def bench(args: argparse.Namespace) -> None:
    from django.test.utils import override_settings, setup_test_environment

    setup_test_environment()
    with override_settings(
        OPENAI_API_KEY="", LLM_OFFLINE_STREAM_SECONDS=0, CELERY_TASK_ALWAYS_EAGER=True
    ):
        rows = run(args.mode, plan_limits=not args.no_plan_limits)
    out = sys.stdout
    limits = "off" if args.no_plan_limits else "the defaults"
    out.write(
        f"\nThe README's demo conversation, plan mode {args.mode}, offline demo model, "
        f"per-conversation and per-visitor limits {limits}\n\n"
    )
    out.write("| message | mode that ran | capped by | LLM calls | tokens |\n")
    out.write("|---|---|---|---:|---:|\n")
    for row in rows:
        out.write(
            f"| {row['text']} | {row['mode']} | {row['capped'] or '–'} | {row['calls']} "
            f"| {row['tokens']:,} |\n"
        )
    total = sum(row["tokens"] for row in rows)
    calls = sum(row["calls"] for row in rows)
    out.write(f"| **all {len(rows)} turns** | | | {calls} | **{total:,}** |\n")


if __name__ == "__main__":
    main()
