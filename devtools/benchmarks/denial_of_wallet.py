"""Denial of wallet: the red team's "100 messages from 10 addresses on a deliberative plan",
replayed through the widget API — Django's test client → widget API
(throttles, token windows) → the turn pipeline run eagerly → the real `openai` SDK → a local
fake OpenAI-compatible server — once with the per-visitor limits off (as on 2f408a3: only the
tenant's 3 M monthly budget) and once with the plan's defaults.

Each address sends 10 messages, each in a new conversation (the most a conversation's own
limits let through). The model's calls are sized like the red team's: ≈ 7,100 tokens each, so
a deliberative turn (4 reasoning steps, 3 feedback calls, the synthesis, 2 refinement rounds)
costs ≈ 85k tokens and an adaptive one ≈ 7k. `--real-counts` lets the fake server count the
real prompts instead (GuideDesk's demo tenant; smaller).

    .venv/bin/python devtools/benchmarks/denial_of_wallet.py [--real-counts]

It uses a throwaway SQLite file (never the project's database) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import (  # noqa: E402
    instant_fake_llm,
    throwaway_django,
    widget_send,
    widget_start,
)

ORIGIN = "https://bench.example"
ADDRESSES = [f"198.51.100.{n}" for n in range(1, 11)]
MESSAGES_PER_ADDRESS = 10
MONTHLY_BUDGET = 3_000_000
CALL_TOKENS = (6_800, 300)  # prompt, completion: 12 calls ≈ the report's 85k per turn


def replies(sized: bool) -> Any:
    """A valid reply for every step a deliberative or adaptive turn makes."""
    from apps.clients.rubrics import SUPPORT
    from devtools.fake_llm import WithUsage, assess_reply

    answer = assess_reply("Returns are accepted within 30 days of delivery.")
    keys = [p["key"] for p in SUPPORT["principles"]]
    by_step: dict[str, Any] = {
        "reason_step": {
            "content": "The customer asks about returns; the policy says 30 days.",
            "status": "continue",
            "scores": dict.fromkeys(keys, 0.8),
            "rationale": "grounded in the policy",
        },
        "feedback": {"feedback": "Quote the policy and say how to start a return."},
        "synthesize": answer,
        "assess": answer,
        "refine_critique": {"score": 80, "issues": [], "critique": "Fine; could be warmer."},
        "improve": {"response": "Happy to help: returns are accepted within 30 days."},
        "critique": {"decision": "PROCEED", "reasoning": "fine", "message": ""},
    }

    def reply(request: Any) -> Any:
        body = by_step.get(request.step)
        if body is None:
            return None
        if sized:
            return WithUsage(body, prompt_tokens=CALL_TOKENS[0], completion_tokens=CALL_TOKENS[1])
        return body

    return reply


def run(*, limits: bool, sized: bool, slug: str) -> dict[str, Any]:
    from django.conf import settings
    from django.core.cache import cache
    from django.db.models import F, Sum
    from django.test import Client as HttpClient
    from django.test.utils import override_settings

    from apps.billing.models import UsageRecord
    from apps.clients.models import AIMode, Client, Plan
    from apps.escalations.models import Escalation
    from apps.reasoning.models import ReasoningTrace

    cache.clear()  # the throttles' windows: each run starts with none
    tenant = json.loads((ROOT / "demo" / "tenant.json").read_text())["clients"][0]
    plan = Plan.objects.create(
        slug=slug, name=slug, ai_mode=AIMode.DELIBERATIVE, monthly_token_budget=MONTHLY_BUDGET
    )
    if not limits:  # as on 2f408a3: no per-visitor limits
        plan.conversation_token_budget = plan.visitor_daily_token_budget = 0
        plan.deliberative_turns_per_hour = 0
        plan.save()
    client = Client.objects.create(
        slug=slug,
        name=tenant["name"],
        plan=plan,
        business_info=tenant["business_info"],
        allowed_origins=[ORIGIN],
    )
    rest: dict[str, Any] = dict(settings.REST_FRAMEWORK)
    rates = dict(rest["DEFAULT_THROTTLE_RATES"])
    if not limits:
        rates["widget_tokens"] = rates["widget_address_tokens"] = None
    rest["DEFAULT_THROTTLE_RATES"] = rates
    http = HttpClient(headers={"Origin": ORIGIN, "X-Widget-Key": client.widget_key})
    statuses: dict[int, int] = {}
    notices = 0

    def send(address: str, text: str) -> dict[str, Any] | None:
        started = widget_start(http, REMOTE_ADDR=address)
        response = widget_send(http, started, text, REMOTE_ADDR=address)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        return response.json() if response.status_code == 201 else None

    with override_settings(REST_FRAMEWORK=rest):
        for n in range(MESSAGES_PER_ADDRESS):
            for address in ADDRESSES:
                body = send(address, f"Can I return the jacket I bought? ({address} #{n})")
                if body and any(r["data"].get("usage_limit") for r in body["replies"]):
                    notices += 1
        usage = UsageRecord.objects.filter(client=client).aggregate(
            t=Sum(F("prompt_tokens") + F("completion_tokens"))
        )
        traces = ReasoningTrace.objects.filter(client=client)
        limit_handoffs = Escalation.objects.filter(client=client, reason="usage_limit")
        window_handoffs = limit_handoffs.filter(detail__startswith="token window").count()
        handoffs = limit_handoffs.count() - window_handoffs
        deliberative = traces.filter(mode="deliberative", llm_calls__gt=0).count()
        adaptive = traces.filter(mode="adaptive", llm_calls__gt=0).count()
        # Then one more customer, from another address.
        customer = send("203.0.113.50", "Hi, how long do I have to return an item?")

    reply = customer["replies"][0] if customer else None
    return {
        "tokens": int(usage["t"] or 0),
        "deliberative": deliberative,
        "adaptive": adaptive,
        "refused_429": statuses.get(429, 0),
        "notices": notices,
        "handoffs": handoffs,
        "window_handoffs": window_handoffs,
        "customer": "answered"
        if reply and reply["kind"] == "text" and not reply["data"].get("usage_limit")
        else f"{reply['kind'] if reply else 'refused'}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--real-counts", action="store_true", help="count the real prompts (demo tenant)"
    )
    args = parser.parse_args()
    with throwaway_django("guidedesk-dow-"):
        bench(args)


def bench(args: argparse.Namespace) -> None:
    from django.test.utils import setup_test_environment

    setup_test_environment()
    sized = not args.real_counts
    with instant_fake_llm() as llm:
        llm.fallback(replies(sized))
        before = run(limits=False, sized=sized, slug="before")
        after = run(limits=True, sized=sized, slug="after")
    out = sys.stdout
    out.write(
        f"\n{len(ADDRESSES)} addresses × {MESSAGES_PER_ADDRESS} messages, deliberative plan, "
        f"monthly budget {MONTHLY_BUDGET:,} tokens "
        f"({'red-team sized calls' if sized else 'real prompt counts'})\n\n"
    )
    rows = [
        ("tokens the 100 messages spent", "tokens"),
        ("deliberative turns", "deliberative"),
        ("adaptive turns", "adaptive"),
        ("messages refused (429, not stored)", "refused_429"),
        ("visitor-limit notices", "notices"),
        ("usage-limit hand-offs (budgets)", "handoffs"),
        ("token-window hand-offs (stored)", "window_handoffs"),
        ("the next customer (another address)", "customer"),
    ]
    width = max(len(name) for name, _ in rows)
    out.write(f"  {'':{width}}  {'limits off':>12}  {'defaults':>12}\n")
    for name, key in rows:
        b, a = before[key], after[key]
        fb = f"{b:,}" if isinstance(b, int) else b
        fa = f"{a:,}" if isinstance(a, int) else a
        out.write(f"  {name:{width}}  {fb:>12}  {fa:>12}\n")


if __name__ == "__main__":
    main()
