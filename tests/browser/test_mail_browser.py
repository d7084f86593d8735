"""The e-mail channel in a real headless Chromium (the system's /usr/bin/chromium;
docs/email.md): a support lead signs into the admin, adds the shop's e-mail channel with the
admin's form (the secret is never shown back; the inbound URL is there to copy), a customer's
e-mail with an attachment arrives, the conversation shows up in the console inbox labelled
E-mail, the lead opens it, sees the e-mail as it was (subject, attachment), claims it and
replies with the page's own form — and the reply arrives in a real SMTP server (aiosmtpd),
threaded on the customer's e-mail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from apps.accounts.models import Role
from apps.core.links import site_url
from apps.mail.models import InboundVia, MailChannel
from apps.mail.services.inbound import mail_receive
from tests.accounts.test_mfa_required import PASSWORD
from tests.browser.helpers import admin_signed_in, open_add_form, shot
from tests.factories import MembershipFactory, UserFactory
from tests.mail.conftest import _smtp_server, email, smtp_sink  # noqa: F401  (fixtures)
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ADDRESS = "help@demo.localhost"
SECRET = "mailgun-signing-key-browser-5e1"
CUSTOMER = "ana@customer.example"
PDF = b"%PDF-1.4\n% the customer's receipt\n"


def test_a_lead_sets_up_email_and_answers_a_customers_mail_from_the_console(
    browser: Any,
    live_server: Any,
    demo: Any,
    db_lock: Any,
    llm: Any,
    smtp_sink: Any,  # noqa: F811
    settings: Any,
    tmp_path: Any,
    screenshots: Any,
) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    with db_lock:
        lead = UserFactory(is_staff=True)
        MembershipFactory(client=demo, user=lead, role=Role.ADMIN)
        lead.user_permissions.add(*Permission.objects.filter(content_type__app_label="mail"))

    # The lead adds the channel with the admin's own form.
    page = admin_signed_in(browser, live_server.url, lead.email, PASSWORD)
    open_add_form(page, "E-mail channels", "Add e-mail channel", demo)
    page.locator("#id_address").fill(ADDRESS)
    page.locator("#id_display_name").fill("Trailhead help desk")
    page.locator("#id_inbound_via").select_option(label="Mailgun")
    page.locator("#id_webhook_secret").fill(SECRET)
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist .success")).to_be_visible()
    with db_lock:
        channel = MailChannel.objects.for_client(demo).get(address=ADDRESS)
    assert channel.webhook_secret == SECRET
    inbound_url = page.get_by_label("Inbound webhook URL")
    expect(inbound_url).to_have_value(site_url() + f"/mail/inbound/{channel.inbound_token}/")
    expect(page.locator(".field-secret_state")).to_contain_text("webhook secret: set")
    assert SECRET not in page.content()
    shot(page, screenshots, "mail-channel-admin.png")

    # A customer's e-mail arrives (as the provider's webhook hands it over); the assistant
    # answers it by e-mail.
    llm.script("assess", assess(response="We open at 9 every weekday.", confidence=9))
    mail = email(
        "When do you open? My receipt is attached.",
        sender=CUSTOMER,
        to=ADDRESS,
        subject="Opening hours",
        attachments=[("receipt.pdf", "application/pdf", PDF)],
    )
    with db_lock:
        received = mail_receive(
            channel=channel, mail=mail, sender_verified=False, via=InboundVia.MAILGUN
        )
    [answer] = smtp_sink.wait(1, to=CUSTOMER)
    assert "We open at 9 every weekday." in answer.get_body(("plain",)).get_content()
    conversation = received.conversation
    assert conversation is not None

    # The console inbox lists it, labelled E-mail.
    page.goto(f"{live_server.url}/console/")
    row = page.locator(f'tr[data-conversation="{conversation.public_id}"]')
    expect(row.locator("[data-channel]")).to_have_text("E-mail")
    row.get_by_role("link").click()

    # The conversation page shows the e-mail as it was.
    thread = page.locator("[data-mail-thread]")
    first = thread.locator(f'[data-mail="{received.public_id}"]')
    expect(first.locator("[data-mail-subject]")).to_have_text("Opening hours")
    expect(first.locator("[data-mail-from]")).to_contain_text(CUSTOMER)
    expect(first.locator("[data-attachment]")).to_have_text("receipt.pdf")
    expect(first.locator("[data-mail-disposition]")).to_contain_text("Accepted")
    expect(thread.locator('[data-direction="out"]')).to_have_count(1)
    with page.expect_download() as download:
        first.locator("[data-attachment]").click()
    assert download.value.suggested_filename == "receipt.pdf"
    assert Path(download.value.path()).read_bytes() == PDF

    # The lead claims it and replies with the page's own form; the reply goes out by e-mail.
    page.get_by_role("button", name="Claim").click()
    expect(page.locator("[data-inbox-assignee]")).to_have_text(lead.email)
    page.get_by_label("Reply to the customer").fill("Hi Ana, on Sundays we open at 11.")
    page.get_by_role("button", name="Send reply").click()
    expect(page.get_by_text("Hi Ana, on Sundays we open at 11.").first).to_be_visible()
    [_, reply] = smtp_sink.wait(2, to=CUSTOMER)
    assert "on Sundays we open at 11" in reply.get_body(("plain",)).get_content()
    assert reply["In-Reply-To"] == f"<{received.header_message_id}>"
    assert reply["Auto-Submitted"] == "auto-replied"
    page.reload()
    expect(page.locator('[data-mail-thread] [data-direction="out"]')).to_have_count(2)
    shot(page, screenshots, "mail-console-thread.png")
    assert page.errors == []
    page.context.close()
