"""Identity by e-mail (docs/email.md "Identity"): a sender the inbound provider vouched for
(DKIM or SPF passed) is the conversation's verified customer, so `customer_scoped` tools run
for that address and carry it in the signed body; an unverified sender gets nothing done and
nothing revealed, and a later unverified e-mail takes the verification back."""

from __future__ import annotations

import pytest

from apps.conversations.models import CustomerVerification
from apps.tools.models import ClientTool, ToolExecution
from tests.mail.conftest import CUSTOMER, email, reply_to
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, lookup_assess

pytestmark = pytest.mark.django_db

ORDER = {"order_id": "TH-12345", "status": "shipped", "address": "1 Elm St, Springfield"}


@pytest.fixture
def scoped(shop) -> ClientTool:
    tool = ClientTool.objects.for_client(shop).get(name="get_order_status")
    tool.customer_scoped = True
    tool.save(update_fields=["customer_scoped"])
    shop.signin_url = "https://shop.example/login"
    shop.save(update_fields=["signin_url"])
    return tool


def look_up(llm) -> None:
    llm.script("assess", lookup_assess(response="Let me look that up."))
    llm.script("compose", {"response": "Order TH-12345 has shipped to 1 Elm St."})


def test_a_verified_sender_runs_a_customer_scoped_tool_as_that_customer(
    mailbox, scoped, llm, webhook, smtp_sink
):
    look_up(llm)
    webhook.default(Reply.ok(ORDER))
    row = mailbox.send(email("Where is my order TH-12345?"), verified=True)
    conversation = row.conversation
    conversation.refresh_from_db()
    assert conversation.customer_verified
    assert conversation.customer_verified_via == CustomerVerification.EMAIL_SENDER
    [request] = webhook.requests
    assert request.json["customer"] == {"id": CUSTOMER, "email": CUSTOMER, "verified": True}
    assert row.sender_verified
    [sent] = smtp_sink.wait(1)
    assert "shipped" in sent.get_body(preferencelist=("plain",)).get_content()


def test_an_unverified_sender_gets_nothing_done_or_revealed(
    mailbox, scoped, llm, webhook, smtp_sink
):
    look_up(llm)
    webhook.default(Reply.ok(ORDER))
    row = mailbox.send(email("Where is my order TH-12345?"), verified=False)
    row.conversation.refresh_from_db()
    assert not row.conversation.customer_verified
    assert webhook.requests == []
    assert ToolExecution.objects.for_client(row.client).count() == 0
    [sent] = smtp_sink.wait(1)
    text = sent.get_body(preferencelist=("plain",)).get_content()
    assert "Elm" not in text and "shipped" not in text


def test_an_unverified_mail_in_a_verified_thread_takes_the_verification_back(
    mailbox, scoped, llm, webhook, smtp_sink
):
    llm.default("assess", assess(response="Hello!", confidence=9))
    first = mailbox.send(email("Hello there, a question"), verified=True)
    [ours] = smtp_sink.wait(1)
    first.conversation.refresh_from_db()
    assert first.conversation.customer_verified
    # A forged From (DKIM and SPF fail) replying into the thread.
    mailbox.send(reply_to(ours, "Where is my order TH-12345?"), verified=False)
    first.conversation.refresh_from_db()
    assert not first.conversation.customer_verified
    assert first.conversation.customer_id == ""
    assert webhook.requests == []


def test_an_unverified_sender_verifies_with_the_one_time_code_by_reply(
    mail_channel, webhook, llm, smtp_sink, django_capture_on_commit_callbacks
):
    import re

    from apps.identity.services import otp_offer
    from tests.identity.conftest import back_office
    from tests.identity.conftest import make_shop as make_code_shop
    from tests.mail.conftest import Mailbox

    webhook.default(back_office)
    shop = make_code_shop("codeshop", webhook.url())
    box = Mailbox(mail_channel(shop), django_capture_on_commit_callbacks)
    llm.default("assess", assess(response="Happy to help.", confidence=9))
    first = box.send(email("A question about my order TH-12345"), verified=False)
    [ours] = smtp_sink.wait(1)
    # The shop's code goes to the address on file for the order (the webhook's answer).
    otp_offer(client=shop, conversation=first.conversation, params={"order_id": "TH-12345"})
    [code_mail] = smtp_sink.wait(1, to="jane@example.com")
    code = re.search(r"\b(\d{6})\b", code_mail.get_body(preferencelist=("plain",)).get_content())
    assert code is not None
    calls = len(llm.requests)
    box.send(reply_to(ours, f"Here it is: {code.group(1)}"), verified=False)
    first.conversation.refresh_from_db()
    assert first.conversation.customer_verified
    assert first.conversation.customer_verified_via == CustomerVerification.EMAIL_CODE
    assert len(llm.requests) == calls  # checked before any model call, never shown to it
    _, answer = smtp_sink.wait(2)
    assert "verified" in answer.get_body(preferencelist=("plain",)).get_content()
    assert code.group(1) not in answer.get_body(preferencelist=("plain",)).get_content()
    # A verification by code is not taken back by a later unverified e-mail.
    box.send(reply_to(answer, "Thanks, where is it now?"), verified=False)
    first.conversation.refresh_from_db()
    assert first.conversation.customer_verified_via == CustomerVerification.EMAIL_CODE
