"""The console inbox at scale (`manage.py bench_inbox`): one client with N conversations
(default 10,000, five messages each) in the configured database, then

- the first page of `/console/inbox.json` (what the inbox fetches), p50/p95 over R requests;
- a search (customer e-mail fragment, an order id, a common word), p50/p95;
- with Redis (`REDIS_URL`): a live update — from a staff action on a conversation to the
  open inbox's doorbell ringing (the console's own `doorbell_stream`, its coalescing
  included) and the page's refetch of `inbox.json` answered, p50/p95.

Requests go through Django's test client as a signed-in agent (middleware, session, view,
template-free JSON), so they cost what the browser's fetch costs minus the network. The
seeded client is kept for re-runs (`--fresh` rebuilds it)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.test import Client as HttpClient
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Membership, Role, User
from apps.clients.models import Client, Plan
from apps.conversations import events
from apps.conversations.models import Conversation, ConversationStatus, Message
from apps.conversations.models import Role as MessageRole
from apps.core.tenancy import tenant_scope
from apps.core.tenant_sql import sql_rows

SLUG = "bench-inbox"
AGENT_EMAIL = "bench-inbox-agent@guidedesk.example"
WORDS = [
    "order",
    "parcel",
    "refund",
    "delivery",
    "late",
    "kettle",
    "blue",
    "size",
    "exchange",
    "invoice",
    "address",
    "courier",
    "discount",
    "voucher",
    "broken",
    "missing",
    "tracking",
    "return",
    "label",
    "warranty",
    "colour",
]


@dataclass
class InboxFigures:
    conversations: int
    messages: int
    vendor: str
    first_page_ms: list[float]
    search_ms: dict[str, list[float]]
    live_ms: list[float]


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _client() -> Client:
    plan, _ = Plan.objects.get_or_create(slug=SLUG, defaults={"name": "Bench inbox"})
    client, _ = Client.objects.get_or_create(
        slug=SLUG, defaults={"name": "Bench inbox", "plan": plan}
    )
    return client


def _agent(client: Client) -> User:
    user = User.objects.filter(email=AGENT_EMAIL).first()
    if user is None:
        user = User.objects.create_user(AGENT_EMAIL, password=None)
    Membership.objects.unscoped("benchmark set-up").get_or_create(
        client=client, user=user, defaults={"role": Role.AGENT}
    )
    return user


def seed(client: Client, count: int, *, seed_value: int = 7, batch: int = 1000) -> None:
    """`count` conversations of five messages (customer, assistant, customer, assistant,
    customer), spread over the last 30 days; one in ten escalated, one in five with an
    e-mail."""
    rng = random.Random(seed_value)  # noqa: S311 - reproducible data, not secrets
    now = timezone.now()
    with tenant_scope(client.pk):
        for start in range(0, count, batch):
            conversations = []
            for n in range(start, min(count, start + batch)):
                last = now - timedelta(minutes=rng.randint(0, 30 * 24 * 60))
                conversations.append(
                    Conversation(
                        client=client,
                        visitor_id=f"visitor-{n}",
                        status=ConversationStatus.ESCALATED
                        if n % 10 == 0
                        else ConversationStatus.OPEN,
                        contact_email=f"customer{n}@example.com" if n % 5 == 0 else "",
                        last_seq=5,
                        last_message_at=last,
                    )
                )
            Conversation.objects.bulk_create(conversations)
            messages = []
            for conv in conversations:
                n = int(conv.visitor_id.split("-")[1])
                for seq in range(1, 6):
                    role = MessageRole.USER if seq % 2 else MessageRole.ASSISTANT
                    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
                    if seq == 1:
                        text = f"Hello, about order TH-{10000 + n}: {text}"
                    messages.append(
                        Message(client=client, conversation=conv, seq=seq, role=role, text=text)
                    )
            Message.objects.bulk_create(messages)
    if connection.vendor == "postgresql":
        for table in ("conversations_conversation", "conversations_message"):
            sql_rows("benchmarks.analyze_conversations", f"ANALYZE {table}", client_id=None)


def _timed(call: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _get(http: HttpClient, url: str, params: dict[str, str]) -> None:
    response = http.get(url, params)
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}")


async def _live_rounds(client: Client, http: HttpClient, url: str, rounds: int) -> list[float]:
    from asgiref.sync import sync_to_async

    from apps.console.views import DOORBELL_COALESCE_SECONDS, doorbell_stream
    from apps.escalations.services import conversation_assign

    hub = events.hub()
    if hub is None:
        return []
    stream = doorbell_stream(
        events.client_key(client.pk), coalesce=DOORBELL_COALESCE_SECONDS["queue"]
    )
    await stream.__anext__()  # "retry: …" — registered with the hub
    await asyncio.wait_for(hub.connected.wait(), timeout=5)
    # Connecting rings every open stream once ("anything may have been missed").
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stream.__anext__(), timeout=1.5)
    agent = await sync_to_async(User.objects.get)(email=AGENT_EMAIL)
    target = await sync_to_async(
        lambda: Conversation.objects.for_client(client).order_by("-last_message_at").first()
    )()

    if target is None:
        raise RuntimeError("no conversation to change")

    def change(assignee: Any) -> None:
        with transaction.atomic():
            conversation_assign(client=client, conversation=target, assignee=assignee)

    out = []
    for n in range(rounds):
        ring = asyncio.ensure_future(stream.__anext__())
        started = time.perf_counter()
        await sync_to_async(change, thread_sensitive=False)(agent if n % 2 == 0 else None)
        line = await asyncio.wait_for(ring, timeout=10)
        if not line.startswith("event: changed"):
            raise RuntimeError(f"unexpected stream line {line!r}")
        await sync_to_async(_get, thread_sensitive=False)(http, url, {"client": SLUG})
        out.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.1)
    await stream.aclose()  # type: ignore[attr-defined]
    await events.close_hub()
    return out


def run(*, conversations: int, rounds: int, fresh: bool, live_rounds: int) -> InboxFigures:
    client = _client()
    if fresh:
        Conversation.objects.unscoped("benchmark reset").filter(client=client).delete()
    have = Conversation.objects.for_client(client).count()
    if have < conversations:
        seed(client, conversations - have)
    agent = _agent(client)
    http = HttpClient(SERVER_NAME="localhost")
    http.force_login(agent)
    url = reverse("console-inbox-poll")
    _get(http, url, {"client": SLUG})  # warm
    first = _timed(lambda: _get(http, url, {"client": SLUG}), rounds)
    searches = {}
    for label, term in (
        ("e-mail", "customer4240@"),
        ("order id", "TH-10042"),
        ("common word", "kettle"),
    ):
        params = {"client": SLUG, "q": term}
        searches[label] = _timed(functools.partial(_get, http, url, params), rounds)
    live: list[float] = []
    if events.push_enabled() and live_rounds:
        live = asyncio.run(_live_rounds(client, http, url, live_rounds))
    return InboxFigures(
        conversations=Conversation.objects.for_client(client).count(),
        messages=Message.objects.for_client(client).count(),
        vendor=connection.vendor,
        first_page_ms=first,
        search_ms=searches,
        live_ms=live,
    )


def markdown(figures: InboxFigures) -> str:
    def line(label: str, values: list[float]) -> str:
        if not values:
            return f"| {label} | – | – | (no Redis) |"
        return (
            f"| {label} | {statistics.median(values):.0f} | {p(values, 0.95):.0f} | {len(values)} |"
        )

    rows = [
        f"{figures.conversations:,} conversations, {figures.messages:,} messages "
        f"({figures.vendor})",
        "",
        "| inbox.json | p50 ms | p95 ms | requests |",
        "|---|---|---|---|",
        line("first page (50 rows)", figures.first_page_ms),
        *(line(f"search: {k}", v) for k, v in figures.search_ms.items()),
        line("live update (change → doorbell → refetch)", figures.live_ms),
    ]
    return "\n".join(rows) + "\n"
