"""The e-mail channel end to end: e-mails in as a provider hands them over, the real turn pipeline
(the openai SDK against the local scripted server, webhook tools against the local webhook
server), and the replies caught by a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import pytest

from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Role
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from apps.mail.models import Direction, Disposition, MailMessage
from apps.platform.local_server import free_port
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.tools.models import PendingAction, PendingActionStatus
from tests.mail.conftest import CUSTOMER, SUPPORT, email, reply_to
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, cancel_assess, critique

pytestmark = pytest.mark.django_db

CANCEL = {"order_id": "TH-12345"}


def body(sent) -> str:
    return sent.get_body(preferencelist=("plain",)).get_content()


def outbound(client) -> list[MailMessage]:
    return list(
        MailMessage.objects.for_client(client).filter(direction=Direction.OUTBOUND).order_by("id")
    )


def ask_to_cancel(mailbox, llm, smtp_sink, text: str = "Please cancel order TH-12345."):
    """Mail 1: the model proposes the destructive tool; the guard asks for confirmation."""
    llm.script("assess", cancel_assess())
    llm.script(
        "critique",
        critique("ASK_USER", "Do you want to cancel order TH-12345?", "Destructive action"),
    )
    first = mailbox.send(email(text, subject="Cancel my order"))
    [question] = smtp_sink.wait(1)
    return first, question


def test_three_email_cancellation_with_confirmation(mailbox, llm, webhook, smtp_sink):
    first, question = ask_to_cancel(mailbox, llm, smtp_sink)
    asked = body(question)
    # The exact action and its parameter, and how to answer by e-mail.
    assert "TH-12345" in asked and '"yes"' in asked and "reply to this e-mail" in asked
    assert question["Subject"] == "Re: Cancel my order"
    assert question["In-Reply-To"] == f"<{first.header_message_id}>"
    assert question["X-Auto-Response-Suppress"] == "All"
    assert webhook.requests == []
    pending = PendingAction.objects.for_client(first.client).get()
    assert pending.status == PendingActionStatus.PENDING

    # Mail 2: "yes" above the quoted question — the confirmation rule reads only the new text.
    llm.script("assess", cancel_assess(confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="User explicitly confirmed"))
    webhook.script(Reply.ok({"order_id": "TH-12345", "status": "cancelled"}))
    llm.script("compose", {"response": "Done! Order TH-12345 has been cancelled."})
    second = mailbox.send(reply_to(question, "Yes, please cancel it."))
    assert second.conversation_id == first.conversation_id
    assert second.message.text == "Yes, please cancel it."
    [request] = webhook.requests
    assert request.json["tool"] == "cancel_order" and request.json["params"] == CANCEL
    _, done = smtp_sink.wait(2)
    assert "Done! Order TH-12345 has been cancelled." in body(done)
    assert done["Subject"] == "Re: Cancel my order"  # never "Re: Re:"
    # Threaded on the customer's "yes", with the whole chain.
    assert done["In-Reply-To"] == f"<{second.header_message_id}>"
    assert first.header_message_id in done["References"]
    assert question["Message-ID"].strip("<>") in done["References"]
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXECUTED
    assert [m.disposition for m in outbound(first.client)] == [Disposition.SENT] * 2


@pytest.mark.parametrize(
    "answer",
    [
        "ok thanks, I'm good",
        "no",
        "No, don't cancel it.",
        "Yes, cancel TH-99999 instead",
        "Thanks, I'll think about it",
    ],
)
def test_a_reply_that_is_no_clear_yes_runs_nothing(answer, mailbox, llm, webhook, smtp_sink):
    _first, question = ask_to_cancel(mailbox, llm, smtp_sink)
    # The model wants to go ahead anyway: the guard holds.
    llm.default("assess", cancel_assess(confirmed=True))
    llm.default("critique", critique("PROCEED", reasoning="go"))
    llm.default("compose", {"response": "Done."})
    webhook.default(Reply.ok({"status": "cancelled"}))
    mailbox.send(reply_to(question, answer))
    assert webhook.requests == []
    assert (
        PendingAction.objects.for_client(mailbox.channel.client)
        .filter(status=PendingActionStatus.EXECUTED)
        .count()
        == 0
    )


def test_an_out_of_office_answering_our_reply_is_never_answered(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    first = mailbox.send(email("When do you open?"))
    [ours] = smtp_sink.wait(1)
    calls = len(llm.requests)
    away = reply_to(
        ours,
        "I am out of the office until Monday.",
        quote=False,
        headers={"Auto-Submitted": "auto-replied", "X-Autoreply": "yes"},
    )
    row = mailbox.send(away)
    assert row.disposition == Disposition.AUTO_REPLY
    assert row.conversation_id == first.conversation_id  # kept on the thread for staff
    assert row.message is None
    assert len(llm.requests) == calls  # no turn
    assert len(smtp_sink.messages) == 1  # nothing sent back
    assert (
        not Message.objects.for_client(first.client)
        .filter(text__contains="out of the office")
        .exists()
    )


@pytest.mark.parametrize(
    "headers",
    [
        {"Precedence": "bulk"},
        {"X-Auto-Response-Suppress": "OOF"},
        {"Auto-Submitted": "auto-generated"},
        {"X-Autorespond": "1"},
    ],
)
def test_auto_replies_of_every_kind(headers, mailbox, llm, smtp_sink):
    row = mailbox.send(email("Automatic answer", headers=headers))
    assert row.disposition == Disposition.AUTO_REPLY
    assert row.conversation is None and llm.requests == [] and smtp_sink.messages == []


def test_a_human_auto_submitted_no_is_answered(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="Hello!", confidence=9))
    row = mailbox.send(email("Hi there, a question", headers={"Auto-Submitted": "no"}))
    assert row.disposition == Disposition.ACCEPTED
    smtp_sink.wait(1)


def test_a_bounce_of_our_reply_is_noted_for_staff_never_answered(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    first = mailbox.send(email("When do you open?"))
    [ours] = smtp_sink.wait(1)
    calls = len(llm.requests)
    from email.message import EmailMessage

    report = EmailMessage()
    report["From"] = "Mail Delivery Subsystem <MAILER-DAEMON@mx.customer.example>"
    report["To"] = SUPPORT
    report["Subject"] = "Undelivered Mail Returned to Sender"
    report["Message-ID"] = "<bounce-1@mx.customer.example>"
    report.set_content("This is the mail system. Your message could not be delivered.")
    report.add_attachment(ours)  # message/rfc822: the returned reply
    report.replace_header("Content-Type", 'multipart/report; report-type="delivery-status"')
    from anymail.inbound import AnymailInboundMessage

    row = mailbox.send(AnymailInboundMessage.parse_raw_mime_bytes(report.as_bytes()))
    assert row.disposition == Disposition.BOUNCE
    assert row.conversation_id == first.conversation_id
    assert len(llm.requests) == calls and len(smtp_sink.messages) == 1
    note = Message.objects.for_client(first.client).get(
        conversation_id=first.conversation_id, data__mail_bounce=str(row.public_id)
    )
    assert note.visibility == "internal" and CUSTOMER in note.text
    assert (
        not Message.objects.for_client(first.client)
        .filter(role=Role.USER, text__contains="mail system")
        .exists()
    )


def test_an_empty_return_path_is_a_bounce(mailbox, llm, smtp_sink):
    row = mailbox.send(email("Delivery failed", headers={"Return-Path": "<>"}))
    assert row.disposition == Disposition.BOUNCE and llm.requests == []


@pytest.mark.parametrize(
    "headers",
    [
        {"List-Id": "Shop news <news.shop.example>"},
        {"List-Unsubscribe": "<mailto:leave@lists.example>", "Precedence": "list"},
    ],
)
def test_a_mailing_list_mail_is_never_answered(headers, mailbox, llm, smtp_sink):
    row = mailbox.send(email("Our weekly newsletter", headers=headers))
    assert row.disposition == Disposition.MAILING_LIST
    assert row.conversation is None
    assert llm.requests == [] and smtp_sink.messages == []
    assert not Conversation.objects.for_client(mailbox.channel.client).exists()


def test_our_own_reply_coming_back_is_not_answered(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    mailbox.send(email("When do you open?"))
    [ours] = smtp_sink.wait(1)
    from anymail.inbound import AnymailInboundMessage

    looped = mailbox.send(AnymailInboundMessage.parse_raw_mime_bytes(ours.as_bytes()))
    assert looped.disposition == Disposition.OWN_MAIL
    from_us = mailbox.send(email("Hello", sender=SUPPORT))
    assert from_us.disposition == Disposition.OWN_MAIL
    assert len(smtp_sink.messages) == 1


def test_a_thread_reply_after_hand_off_waits_for_staff(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    first = mailbox.send(email("When do you open?"))
    [ours] = smtp_sink.wait(1)
    conversation = first.conversation
    escalation_create(
        client=first.client,
        conversation=conversation,
        reason=EscalationReason.STAFF_TAKEOVER,
        notify=False,
    )
    calls = len(llm.requests)
    row = mailbox.send(reply_to(ours, "And on Sundays?"))
    assert row.disposition == Disposition.ACCEPTED
    assert row.conversation_id == conversation.pk
    assert row.message.text == "And on Sundays?" and row.message.role == Role.USER
    trace = ReasoningTrace.objects.for_client(first.client).get(user_message=row.message)
    assert trace.status == TraceStatus.SKIPPED
    assert len(llm.requests) == calls
    assert len(smtp_sink.to(CUSTOMER)) == 1  # no automatic reply


def test_a_spanish_email_is_answered_in_spanish(mailbox, llm, webhook, smtp_sink):
    shop = mailbox.channel.client
    shop.language, shop.languages = "en", ["en", "es"]
    shop.save(update_fields=["language", "languages"])
    llm.script("assess", cancel_assess(response="Puedo cancelar el pedido TH-12345."))
    llm.script("critique", critique("ASK_USER", "¿Cancelo el pedido TH-12345?", "Destructiva"))
    row = mailbox.send(
        email(
            "Hola, quiero cancelar mi pedido TH-12345 porque ya no lo necesito. "
            "¿Me pueden ayudar, por favor?",
            subject="Cancelar pedido",
        )
    )
    row.conversation.refresh_from_db()
    assert row.conversation.language == "es"
    [question] = smtp_sink.wait(1)
    text = body(question)
    # The e-mail's fixed words are Spanish: how to answer, and the action.
    assert "responda a este correo" in text.lower() and "TH-12345" in text
    assert "reply to this e-mail" not in text
    assert question["Subject"] == "Re: Cancelar pedido"
    # The model was asked to reply in Spanish.
    assert "Reply in Spanish (es)." in llm.calls("assess")[0].prompt_text


def test_a_10_mb_attachment_is_kept_and_never_shown_to_the_model(mailbox, llm, smtp_sink):
    marker = b"SECRET-PDF-CONTENT-"
    content = marker + b"x" * (10 * 1024 * 1024 - len(marker))
    llm.script("assess", assess(response="Thanks, we got your invoice.", confidence=9))
    row = mailbox.send(
        email(
            "Here is my invoice, please check it.",
            attachments=[("invoice.pdf", "application/pdf", content)],
        )
    )
    [attachment] = row.attachments.all()
    assert attachment.refused == "" and attachment.size == 10 * 1024 * 1024
    with attachment.file.open("rb") as handle:
        assert handle.read(len(marker)) == marker
    prompt = llm.calls("assess")[0].prompt_text
    assert "[attachment: invoice.pdf (application/pdf, 10.0 MB)]" in prompt
    assert "SECRET-PDF-CONTENT" not in prompt
    assert "Thanks, we got your invoice." in body(smtp_sink.wait(1)[0])


def test_an_attachment_over_the_limit_or_of_a_refused_type_is_recorded_not_kept(
    help_mailbox, llm, smtp_sink
):
    box = help_mailbox(max_attachment_bytes=1024 * 1024)
    llm.script("assess", assess(response="Got it.", confidence=9))
    row = box.send(
        email(
            "My photos and a program",
            to="help@shop.example",
            attachments=[
                ("big.jpg", "image/jpeg", b"\xff" * (2 * 1024 * 1024)),
                ("tool.exe", "application/x-msdownload", b"MZ" * 100),
                ("ok.png", "image/png", b"\x89PNG" + b"0" * 100),
            ],
        )
    )
    kept = {a.filename: a for a in row.attachments.all()}
    assert kept["big.jpg"].refused and not kept["big.jpg"].file
    assert kept["tool.exe"].refused and not kept["tool.exe"].file
    assert kept["ok.png"].refused == "" and kept["ok.png"].file
    assert "Got it." in body(smtp_sink.wait(1)[0])  # the text is still answered


def test_threading_by_in_reply_to_and_by_references_never_by_subject(mailbox, llm, smtp_sink):
    llm.default("assess", assess(response="Noted.", confidence=9))
    first = mailbox.send(email("First question", subject="Order TH-12345"))
    [ours] = smtp_sink.wait(1)
    # In-Reply-To alone.
    by_reply = mailbox.send(
        email("More", subject="whatever", in_reply_to=ours["Message-ID"], references="")
    )
    assert by_reply.conversation_id == first.conversation_id
    # References alone (newest known id wins; unknown ones are skipped).
    by_refs = mailbox.send(
        email("Even more", subject="x", references=f"<unknown@x> {ours['Message-ID']} <new@x>")
    )
    assert by_refs.conversation_id == first.conversation_id
    # The same subject, no threading headers: a new conversation.
    same_subject = mailbox.send(email("Another order", subject="Order TH-12345"))
    assert same_subject.conversation_id != first.conversation_id
    # Another sender replying into the thread: their own conversation.
    stranger = mailbox.send(
        email("Me too", sender="eve@else.example", in_reply_to=ours["Message-ID"])
    )
    assert stranger.conversation_id not in (first.conversation_id, same_subject.conversation_id)


def test_a_duplicate_message_id_is_recorded_and_nothing_else_happens(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    mail = email("When do you open?", message_id="<same@customer.example>")
    first = mailbox.send(mail)
    smtp_sink.wait(1)
    calls = len(llm.requests)
    again = mailbox.send(email("When do you open?", message_id="<same@customer.example>"))
    assert again.disposition == Disposition.DUPLICATE
    assert again.conversation_id == first.conversation_id and again.message is None
    assert len(llm.requests) == calls and len(smtp_sink.messages) == 1
    assert Message.objects.for_client(first.client).filter(role=Role.USER).count() == 1


def test_a_reply_with_no_new_text_is_not_answered(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    first = mailbox.send(email("When do you open?"))
    [ours] = smtp_sink.wait(1)
    calls = len(llm.requests)
    row = mailbox.send(reply_to(ours, ""))
    assert row.disposition == Disposition.EMPTY
    assert row.conversation_id == first.conversation_id
    assert len(llm.requests) == calls and len(smtp_sink.messages) == 1


def test_html_only_mail_reaches_the_model_as_text(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="<script>alert(1)</script> **Sure**", confidence=9))
    mailbox.send(
        email(
            "",
            html="<html><body><p>Where is <b>my order</b>?</p><script>steal()</script></body>",
        )
    )
    prompt = llm.calls("assess")[0].prompt_text
    assert "Where is my order?" in prompt and "<b>" not in prompt and "steal" not in prompt
    [sent] = smtp_sink.wait(1)
    html = sent.get_body(preferencelist=("html",)).get_content()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<strong>Sure</strong>" in html


def test_an_overlong_email_is_cut_with_a_note_for_staff(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="Thanks for the details.", confidence=9))
    long_text = "word " * 2000
    row = mailbox.send(email(long_text))
    assert len(row.message.text) <= 4000
    assert row.text.strip() == long_text.strip()  # the e-mail is kept whole
    note = Message.objects.for_client(row.client).get(data__mail=str(row.public_id))
    assert note.visibility == "internal" and "4000" in note.text


def test_the_thread_cap_hands_the_conversation_to_staff(help_mailbox, shop, llm, smtp_sink):
    box = help_mailbox(max_replies_per_thread_hour=2)
    llm.default("assess", assess(response="Noted.", confidence=9))
    first = box.send(email("One", to="help@shop.example"))
    [ours] = smtp_sink.wait(1)
    second = box.send(reply_to(ours, "Two", to="help@shop.example"))
    [_, ours2] = smtp_sink.wait(2)
    calls = len(llm.requests)
    third = box.send(reply_to(ours2, "Three", to="help@shop.example"))
    assert [first.disposition, second.disposition, third.disposition] == [
        Disposition.ACCEPTED,
        Disposition.ACCEPTED,
        Disposition.THREAD_CAPPED,
    ]
    conversation = Conversation.objects.for_client(shop).get(pk=first.conversation_id)
    assert conversation.status == ConversationStatus.ESCALATED
    assert third.message.text == "Three"  # kept for staff
    assert len(llm.requests) == calls and len(smtp_sink.to(CUSTOMER)) == 2


def test_the_sender_cap_holds_over_new_threads(help_mailbox, llm, smtp_sink):
    box = help_mailbox(max_replies_per_sender_hour=2)
    llm.default("assess", assess(response="Noted.", confidence=9))
    rows = [box.send(email(f"Question {n}", to="help@shop.example")) for n in range(4)]
    assert [r.disposition for r in rows] == [
        Disposition.ACCEPTED,
        Disposition.ACCEPTED,
        Disposition.SENDER_CAPPED,
        Disposition.SENDER_CAPPED,
    ]
    smtp_sink.wait(2)
    assert len(smtp_sink.to(CUSTOMER)) == 2
    for row in rows[2:]:
        assert row.conversation.status == ConversationStatus.ESCALATED
    # Another sender is answered as usual.
    other = box.send(email("Hello", sender="bob@else.example", to="help@shop.example"))
    assert other.disposition == Disposition.ACCEPTED


def test_a_failed_send_is_recorded_and_retried(mailbox, llm, smtp_sink, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.mail.services.outbound import mails_send_due

    sink_port = settings.EMAIL_PORT
    settings.EMAIL_PORT = free_port()  # nothing listens there
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    row = mailbox.send(email("When do you open?"))  # the turn is not disturbed
    assert row.message.role == Role.USER
    [out] = outbound(row.client)
    assert out.disposition == Disposition.SEND_FAILED and out.error
    assert out.next_attempt_at is not None and out.send_attempts == 1
    settings.EMAIL_PORT = sink_port
    assert mails_send_due(now=timezone.now()) == 0  # not due yet
    assert mails_send_due(now=timezone.now() + timedelta(minutes=2)) == 1
    [sent] = smtp_sink.wait(1)
    out.refresh_from_db()
    assert out.disposition == Disposition.SENT and out.send_attempts == 2
    assert sent["Message-ID"] == f"<{out.header_message_id}>"  # the same e-mail
    assert mails_send_due(now=timezone.now() + timedelta(days=1)) == 0


def test_the_same_turn_is_never_mailed_twice(mailbox, llm, smtp_sink):
    from apps.core.tenancy import tenant_scope
    from apps.mail.services.outbound import turn_reply_send

    llm.script("assess", assess(response="We open at 9.", confidence=9))
    row = mailbox.send(email("When do you open?"))
    smtp_sink.wait(1)
    trace = ReasoningTrace.objects.for_client(row.client).get(user_message=row.message)
    with tenant_scope(row.client_id):  # as the retried task runs
        again = turn_reply_send(
            conversation_id=row.conversation_id, trace_id=trace.pk, client_id=row.client_id
        )
    assert again is None
    assert len(smtp_sink.messages) == 1 and len(outbound(row.client)) == 1


def test_the_hand_off_notice_goes_out_by_email(mailbox, llm, smtp_sink):
    llm.script(
        "assess",
        assess(response="", confidence=2, tool_call="cancel_order", tool_params=CANCEL),
    )
    llm.script("critique", critique("ESCALATE", "A person will look at this.", "unsure"))
    row = mailbox.send(email("Something strange happened with order TH-12345"))
    [sent] = smtp_sink.wait(1)
    handoff = Message.objects.for_client(row.client).get(
        conversation_id=row.conversation_id, kind=Kind.HANDOFF
    )
    assert handoff.text in body(sent)


def test_a_staff_reply_sent_first_takes_an_unsent_earlier_reply_with_it(mailbox, llm, smtp_sink):
    """A turn's reply whose task has not run yet when staff reply must not be left behind the
    conversation's mark: both go out, in order, in the staff reply's e-mail."""
    from apps.conversations.services import message_append
    from apps.mail.services.outbound import mail_reply_send

    llm.script("assess", assess(response="We open at 9.", confidence=9))
    row = mailbox.send(email("When do you open?"))
    smtp_sink.wait(1)
    conversation = Conversation.objects.for_client(row.client).get(pk=row.conversation_id)
    client = row.client
    earlier = message_append(
        client=client, conversation=conversation, role=Role.ASSISTANT, text="Unsent turn reply."
    )
    staff = message_append(
        client=client, conversation=conversation, role=Role.STAFF, text="Staff reply here."
    )
    sent_row = mail_reply_send(client=client, conversation=conversation, messages=[staff])
    assert sent_row is not None
    [_, mailed] = smtp_sink.wait(2)
    text = body(mailed)
    assert text.index("Unsent turn reply.") < text.index("Staff reply here.")
    # The turn's own task, running late, finds nothing left to send.
    assert mail_reply_send(client=client, conversation=conversation, messages=[earlier]) is None
    assert len(smtp_sink.messages) == 2
