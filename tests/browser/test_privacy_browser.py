"""A customer's erasure request in a real headless Chromium (the system's /usr/bin/chromium): a
support lead finds the customer by e-mail in the admin, downloads their data, erases it, and the
usage report for the period still adds up."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from apps.accounts.models import Role
from apps.billing.models import UsageRecord
from apps.billing.selectors import usage_report
from apps.conversations.models import Conversation, Message
from apps.privacy.models import DataSubjectRequest
from tests.api.conftest import add_turn, make_conversation_with_turn
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import page_signed_in_as
from tests.factories import MembershipFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
EMAIL = "marta.lind@example.net"


def admin_page(browser: Any, live_server: Any, client: Any) -> Any:
    user = MembershipFactory(client=client, role=Role.ADMIN).user
    user.user_permissions.add(*Permission.objects.all())
    return page_signed_in_as(
        browser,
        live_server.url,
        user,
        viewport={"width": 1400, "height": 900},
        accept_downloads=True,
    )


def report(client: Any) -> dict[str, Any]:
    today = timezone.localdate()
    return dataclasses.asdict(usage_report(client=client, start=today, end=today, group_by="mode"))


def test_a_support_lead_exports_and_erases_a_customer(
    browser, live_server, db_lock, client_a, client_b
):
    with db_lock:
        conv, _ = make_conversation_with_turn(client_a, text="Marta here, my parcel is late")
        add_turn(client_a, conv, text="Please answer to marta.lind@example.net")
        # The customer confirmed the address: only then does a search by e-mail take it.
        Conversation.objects.for_client(client_a).filter(pk=conv.pk).update(
            contact_email=EMAIL, contact_email_confirmed_at=timezone.now()
        )
        for t in conv.traces.all():
            UsageRecord.objects.create(
                client=client_a,
                conversation=conv,
                trace=t,
                mode="adaptive",
                step="assess",
                model="gpt-4o-mini",
                prompt_tokens=700,
                completion_tokens=80,
                cost_usd=Decimal("0.00015"),
                billed_usd=Decimal("0.000225"),
            )
        other, _ = make_conversation_with_turn(client_b, text="Marta at the other shop")
        Conversation.objects.for_client(client_b).filter(pk=other.pk).update(
            contact_email=EMAIL, contact_email_confirmed_at=timezone.now()
        )
        before = report(client_a)
        page = admin_page(browser, live_server, client_a)

    page.goto(live_server.url + reverse("admin:privacy_datasubjectrequest_changelist"))
    page.get_by_role("link", name="Find a customer").click()
    page.locator("#id_match_kind").select_option("email")
    page.locator("#id_value").fill(EMAIL.upper())
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#privacy-conversations")).to_contain_text(str(conv.public_id))
    expect(page.locator("#privacy-would-erase")).to_contain_text("conversations.Message")

    with page.expect_download() as download_info:
        page.locator("#privacy-export-json").click()
    document = json.loads(Path(download_info.value.path()).read_text(encoding="utf-8"))
    [exported] = document["conversations"]
    assert [m["text"] for m in exported["messages"] if m["role"] == "user"] == [
        "Marta here, my parcel is late",
        "Please answer to marta.lind@example.net",
    ]

    page.locator("#privacy-confirm").check()
    page.locator("#privacy-erase").click()
    expect(page.locator(".messagelist")).to_contain_text("Erased the data of 1 conversation")
    expect(page.locator("body")).to_contain_text("conversations.Message")
    page.screenshot(path=str(SCREENSHOTS / "privacy-erased.png"), full_page=True)

    with db_lock:
        assert report(client_a) == before
        assert not Message.objects.filter(conversation=conv).exclude(text="").exists()
        assert Conversation.objects.for_client(client_b).get(pk=other.pk).contact_email == EMAIL
        kinds = list(
            DataSubjectRequest.objects.for_client(client_a)
            .order_by("created_at")
            .values_list("kind", flat=True)
        )
        assert kinds == ["export", "erase"]

    # The next usage report still adds up: the same billed total on the admin's usage page.
    page.goto(live_server.url + reverse("admin:billing_client_usage", args=[client_a.pk]))
    expect(page.locator("body")).to_contain_text("0.00045")
    assert page.errors == []
