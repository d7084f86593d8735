"""The daily retention task and the manage.py commands: idle conversations past the plan's
retention_days are erased in bounded batches with a progress line, exactly once; a plan with 0
keeps everything; records past their keeping period go."""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role
from apps.conversations.services import conversation_create, message_append
from apps.privacy.models import DataSubjectRequest, ErasedConversation, RequestKind
from apps.privacy.services import retention_apply
from apps.privacy.tasks import apply_retention
from tests.factories import ClientFactory, PlanFactory

pytestmark = pytest.mark.django_db


def chat(client: Client, text: str, *, idle_days: int, email: str = "") -> Conversation:
    conv, _ = conversation_create(client=client, visitor_id=f"v-{text[:6]}")
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    Conversation.objects.for_client(client).filter(pk=conv.pk).update(
        last_message_at=timezone.now() - timedelta(days=idle_days), contact_email=email
    )
    return conv


def texts(client: Client) -> set[str]:
    return set(Message.objects.for_client(client).exclude(text="").values_list("text", flat=True))


@pytest.fixture
def kept_30(db) -> Client:
    return ClientFactory(slug="thirty", plan=PlanFactory(slug="keep-30", retention_days=30))


@pytest.fixture
def keeps_all(db) -> Client:
    return ClientFactory(slug="forever", plan=PlanFactory(slug="keep-all", retention_days=0))


def test_retention_erases_idle_conversations_in_batches_once(
    kept_30: Client, keeps_all: Client, caplog: pytest.LogCaptureFixture
) -> None:
    old = [chat(kept_30, f"old question number {i}", idle_days=40 + i) for i in range(3)]
    chat(kept_30, "a recent question", idle_days=5)
    chat(keeps_all, "a very old question kept", idle_days=900)

    with caplog.at_level(logging.INFO, logger="apps.privacy.services"):
        first = retention_apply(limit=2)
    assert (first.erased, first.remaining) == (2, 1)
    assert "client thirty: erased 2 of 3 conversations idle > 30 days (1 left" in caplog.text
    # Oldest first.
    assert set(
        ErasedConversation.objects.for_client(kept_30).values_list("conversation_id", flat=True)
    ) == {old[2].pk, old[1].pk}

    second = retention_apply(limit=2)
    assert (second.erased, second.remaining) == (1, 0)
    third = retention_apply(limit=2)
    assert (third.erased, third.remaining) == (0, 0)

    assert texts(kept_30) == {"a recent question"}
    assert texts(keeps_all) == {"a very old question kept"}
    records = DataSubjectRequest.objects.for_client(kept_30).order_by("created_at")
    assert [(r.kind, r.conversations, r.channel) for r in records] == [
        (RequestKind.RETENTION, 2, "schedule"),
        (RequestKind.RETENTION, 1, "schedule"),
    ]
    assert not DataSubjectRequest.objects.for_client(keeps_all).exists()


def test_a_dry_run_counts_and_changes_nothing(kept_30: Client) -> None:
    chat(kept_30, "old question about boots", idle_days=45)
    report = retention_apply(dry_run=True)
    assert report.erased == 1
    assert texts(kept_30) == {"old question about boots"}
    assert not ErasedConversation.objects.for_client(kept_30).exists()
    assert not DataSubjectRequest.objects.for_client(kept_30).exists()


def test_the_daily_task_is_scheduled_and_purges_old_records(kept_30: Client) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["privacy-apply-retention"]
    assert entry["task"] == apply_retention.name == "privacy.apply_retention"
    chat(kept_30, "old question about tents", idle_days=31)
    stale = DataSubjectRequest.objects.create(
        client=kept_30,
        kind=RequestKind.ERASE,
        match_kind="email",
        channel="api",
        keep_until=timezone.localdate() - timedelta(days=1),
    )
    result = apply_retention.apply().get()
    assert result == {"erased": 1, "remaining": 0, "records_purged": 1}
    assert not DataSubjectRequest.objects.for_client(kept_30).filter(pk=stale.pk).exists()
    [kept] = DataSubjectRequest.objects.for_client(kept_30)
    assert kept.keep_until == timezone.localdate() + timedelta(
        days=settings.PRIVACY_RECORD_KEEP_DAYS
    )


def test_commands(kept_30: Client, tmp_path: Path) -> None:
    conv = chat(kept_30, "where is my parcel to Porto?", idle_days=1, email="ana@example.com")
    # Nobody confirmed the address: the command lists the conversation instead of erasing it …
    with pytest.raises(CommandError, match="never confirmed") as refused:
        call_command("privacy_erase", client="thirty", email="ANA@example.com", dry_run=True)
    assert str(conv.public_id) in str(refused.value)
    # … until staff include it by id.
    out = io.StringIO()
    call_command(
        "privacy_erase",
        client="thirty",
        email="ANA@example.com",
        dry_run=True,
        include_unconfirmed=[str(conv.public_id)],
        stdout=out,
    )
    assert "Would erase 1 conversation(s) of thirty" in out.getvalue()
    assert "conversations.Message: 1" in out.getvalue()
    assert texts(kept_30) == {"where is my parcel to Porto?"}

    target = tmp_path / "export.json"
    call_command(
        "privacy_export",
        client="thirty",
        conversation=str(conv.public_id),
        output=str(target),
        stderr=io.StringIO(),
    )
    document = json.loads(target.read_text())
    assert document["conversations"][0]["messages"][0]["text"] == "where is my parcel to Porto?"

    out = io.StringIO()
    call_command(
        "privacy_erase",
        client="thirty",
        email="ana@example.com",
        include_unconfirmed=[str(conv.public_id)],
        stdout=out,
    )
    assert "Erased 1 conversation(s)" in out.getvalue()
    assert texts(kept_30) == set()
    kinds = set(DataSubjectRequest.objects.for_client(kept_30).values_list("kind", flat=True))
    assert kinds == {"export", "erase"}

    with pytest.raises(CommandError, match="No conversation"):
        call_command("privacy_erase", client="thirty", email="ana@example.com")
    with pytest.raises(CommandError, match="no client"):
        call_command("privacy_export", client="nobody", email="ana@example.com")

    chat(kept_30, "an old question about stoves", idle_days=60)
    out = io.StringIO()
    call_command("retention_run", dry_run=True, stdout=out)
    assert "Would erase 1 conversation(s)" in out.getvalue()
    call_command("retention_run", stdout=io.StringIO())
    assert texts(kept_30) == set()
