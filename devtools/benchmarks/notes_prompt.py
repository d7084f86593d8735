"""What cross-session notes cost a turn: prompt tokens added by the notes block and SQL queries
added per turn, with 0, 20 and 200 stored notes, in standard (`respond`) and adaptive (`assess`).

Every turn runs through `turn_process` (what a worker runs) with the real `openai` SDK against
the test suite's scripted OpenAI-compatible server (zero latency). For each count of stored
notes the same one-call turn runs with the plan's notes off and on; the differences are what
notes add. Prompt tokens are the server's count (one token per four characters, as the offline
estimate); the notes block's own estimate and the ids that reached the prompt come from the
turn's `notes` trace step. SQL is counted for `turn_process` with the notes cache warm (the
normal case: the cache is only cold after a note was written) and once with it cold.

Run from the project root:

    .venv/bin/python devtools/benchmarks/notes_prompt.py [--turns 20] [--budget 400]

It uses a throwaway SQLite file (never the project's database) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import instant_fake_llm, throwaway_django  # noqa: E402
from devtools.fake_llm import assess_reply  # noqa: E402

ASSESS = assess_reply("We ship within one business day.")
RESPOND: dict[str, Any] = {
    "response": "We ship within one business day.",
    "tool_call": None,
    "tool_params": {},
}
BUSINESS_INFO = {
    "about": {"description": "Outdoor gear."},
    "contact": {"hours": "9-5", "email": "help@bench.example"},
    "policies": {"shipping": "We ship within one business day. Delivery takes 3-7 days."},
    "faqs": [{"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."}],
}
# Realistic note lines: what the automatic notes (apps/reasoning/turn_notes.py, in the system's
# own words) and staff write. `{tool}` cycles through 20 tool names and `{variant}` through two
# outcomes, so 200 stored notes are 200 different notes (identical ones are deduplicated).
TOOLS = [
    "get_order_status",
    "track_shipment",
    "update_shipping_address",
    "cancel_order",
    "request_refund",
    "gift_card_balance",
    "check_stock",
    "store_hours",
    "return_label",
    "exchange_size",
    "loyalty_points",
    "warranty_claim",
    "invoice_copy",
    "delivery_slot",
    "price_match",
    "rental_booking",
    "repair_status",
    "backorder_eta",
    "newsletter_opt_out",
    "gift_wrap",
]
FAILURE_KINDS = ["unreachable after retries", "timed out"]
CONFIDENCE = [9, 8]
HANDOFF = ["the customer asked for a human", "a tool failed"]
SAMPLES = [
    (
        "failure",
        "{tool}",
        "A request for information went to tool {tool} (read): it failed ({failure}).",
    ),
    (
        "success",
        "{tool}",
        "A request for information was answered by tool {tool} (read): it succeeded and the "
        "reply was confident ({confidence}/10).",
    ),
    (
        "failure",
        "{tool}",
        "Handed to a person because {handoff}; the last tool that ran: tool {tool} (read).",
    ),
    ("tip", "", "Customers asking about parcel {n} usually mean the latest order; confirm it."),
    ("pattern", "", "Questions about customs fees come from EU customers (seen {n} times)."),
]


def sample_fields(n: int) -> dict[str, Any]:
    i = n // len(SAMPLES)
    variant = (i // len(TOOLS)) % 2
    return {
        "n": 10000 + n,
        "tool": TOOLS[i % len(TOOLS)],
        "failure": FAILURE_KINDS[variant],
        "confidence": CONFIDENCE[variant],
        "handoff": HANDOFF[variant],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="Measured turns per cell.")
    parser.add_argument("--budget", type=int, default=400, help="Plan's notes token budget.")
    args = parser.parse_args()

    with throwaway_django("guidedesk-notes-"):
        bench(args)


def bench(args: argparse.Namespace) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.clients.models import AIMode, Client, Plan
    from apps.conversations.models import Role
    from apps.conversations.services import conversation_create, message_append
    from apps.core.tenancy import tenant_scope
    from apps.notes.models import Note, NoteSource
    from apps.notes.services import note_add
    from apps.reasoning.models import ReasoningStep, ReasoningTrace
    from apps.reasoning.services import turn_process
    from devtools.fake_llm import count_prompt_tokens

    rows: list[dict[str, Any]] = []
    with instant_fake_llm() as llm:
        for mode, step, reply in (
            (AIMode.STANDARD, "respond", RESPOND),
            (AIMode.ADAPTIVE, "assess", ASSESS),
        ):
            for stored in (0, 20, 200):
                cache.clear()
                plan = Plan.objects.create(
                    slug=f"bench-{mode}-{stored}",
                    name=mode,
                    ai_mode=mode,
                    notes_prompt_budget_tokens=args.budget,
                )
                client = Client.objects.create(
                    slug=f"bench-{mode}-{stored}",
                    name="Bench Outfitters",
                    plan=plan,
                    business_info=BUSINESS_INFO,
                )
                now = timezone.now()
                for n in range(stored):
                    kind, ref, text = SAMPLES[n % len(SAMPLES)]
                    fields = sample_fields(n)
                    note = note_add(
                        client=client,
                        type=kind,
                        ref=ref.format(**fields),
                        content=text.format(**fields),
                        language="en" if n % 3 else "",
                        source=NoteSource.STAFF,
                    )
                    Note.objects.filter(pk=note.pk, client_id=note.client_id).update(
                        created_at=now - timedelta(minutes=37 * (stored - n))
                    )
                # every sample line is a different note: none was deduplicated
                assert Note.objects.for_client(client).count() == stored

                def turn(client: Client = client, step: str = step, reply: Any = reply) -> int:
                    llm.script(step, reply)
                    conversation, _ = conversation_create(client=client)
                    message = message_append(
                        client=client,
                        conversation=conversation,
                        role=Role.USER,
                        text="How fast do you ship?",
                    )
                    with (
                        CaptureQueriesContext(connection) as captured,
                        tenant_scope(message.client_id),
                    ):
                        turn_process(message_id=message.pk)
                    trace = ReasoningTrace.objects.for_client(client).get(
                        user_message_id=message.pk
                    )
                    if trace.llm_calls != 1 or trace.escalated:
                        raise SystemExit(f"turn did not run as scripted ({trace.llm_calls} calls)")
                    return len(captured)

                def measure(enabled: bool, plan: Plan = plan) -> dict[str, float]:
                    plan.notes_enabled = enabled
                    plan.save()
                    cache.clear()
                    cold = turn()  # the cache is cold after a write (or a restart)
                    queries, prompt_tokens = [], []
                    for _ in range(args.turns):
                        before = len(llm.requests)
                        queries.append(turn())
                        prompt_tokens.append(count_prompt_tokens(llm.requests[before].messages))
                    return {
                        "cold": cold,
                        "sql": statistics.mean(queries),
                        "prompt": statistics.mean(prompt_tokens),
                    }

                off = measure(False)
                on = measure(True)
                steps = ReasoningStep.objects.filter(trace__client=client, name="notes")
                last = steps.order_by("-pk").first()
                rows.append(
                    {
                        "mode": mode,
                        "stored": stored,
                        "prompt_off": off["prompt"],
                        "prompt_on": on["prompt"],
                        "block": last.output["tokens"] if last else 0,
                        "notes_in": len(last.output["note_ids"]) if last else 0,
                        "sql_off": off["sql"],
                        "sql_on": on["sql"],
                        "sql_cold": on["cold"] - off["cold"],
                    }
                )

    out = sys.stdout.write
    out(
        f"Budget {args.budget} tokens, {args.turns} turns per cell.\n\n"
        "| mode | stored notes | notes in prompt | notes block (tokens) | prompt tokens off → on "
        "(added) | SQL/turn off → on, cache warm (added) | added SQL, cache cold |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n"
    )
    for r in rows:
        added_prompt = r["prompt_on"] - r["prompt_off"]
        added_sql = r["sql_on"] - r["sql_off"]
        out(
            f"| {r['mode']} | {r['stored']} | {r['notes_in']} | {r['block']} | "
            f"{r['prompt_off']:.0f} → {r['prompt_on']:.0f} (+{added_prompt:.0f}) | "
            f"{r['sql_off']:.1f} → {r['sql_on']:.1f} (+{added_sql:.1f}) | +{r['sql_cold']} |\n"
        )


if __name__ == "__main__":
    main()
