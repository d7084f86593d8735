"""Reading an inbound e-mail without a database: what is never answered (loops, bounces, lists,
our own mail) and what a customer's new text is (quoted history and signatures stripped, in
several languages; HTML turned into text; lists kept)."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from apps.mail.models import Disposition
from apps.mail.services.classify import bounced_message_ids, message_ids, never_answer
from apps.mail.services.content import html_to_text, new_text

US = "support@shop.example"


def mail(
    headers: dict[str, str] | None = None, sender: str = "ana@customer.example"
) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = US
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content("Hello")
    return msg


def verdict(
    headers: dict[str, str] | None = None, sender: str = "ana@customer.example", ours=False
):
    return never_answer(mail(headers, sender), from_address=sender, channel_address=US, ours=ours)


@pytest.mark.parametrize(
    ("headers", "sender", "expected"),
    [
        ({}, "ana@customer.example", None),
        ({"Auto-Submitted": "no"}, "ana@customer.example", None),
        ({"X-Auto-Response-Suppress": "DR, RN"}, "ana@customer.example", None),
        ({"Precedence": "first-class"}, "ana@customer.example", None),
        ({"Auto-Submitted": "auto-replied"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"Auto-Submitted": "auto-generated"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"X-Autoreply": "yes"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"X-Autorespond": "vacation"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"Precedence": "junk"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"Precedence": "auto_reply"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"X-Auto-Response-Suppress": "All"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"X-Auto-Response-Suppress": "DR, OOF"}, "ana@customer.example", Disposition.AUTO_REPLY),
        ({"Return-Path": "<>"}, "ana@customer.example", Disposition.BOUNCE),
        ({}, "MAILER-DAEMON@mx.example", Disposition.BOUNCE),
        ({}, "postmaster@mx.example", Disposition.BOUNCE),
        ({}, "", Disposition.BOUNCE),
        ({"List-Id": "<news.example>"}, "ana@customer.example", Disposition.MAILING_LIST),
        (
            {"List-Unsubscribe": "<mailto:x@y>", "Precedence": "list"},
            "ana@customer.example",
            Disposition.MAILING_LIST,
        ),
        ({}, "Support@Shop.example", Disposition.OWN_MAIL),
    ],
)
def test_what_is_never_answered(headers, sender, expected):
    assert verdict(headers, sender) == expected


def test_our_own_message_id_is_our_own_mail():
    assert verdict(ours=True) == Disposition.OWN_MAIL


def test_a_delivery_report_names_the_reply_it_returns():
    returned = mail({"Message-ID": "<ours-1@shop.example>"}, sender=US)
    report = EmailMessage()
    report["From"] = "MAILER-DAEMON@mx.example"
    report.set_content("Delivery failed")
    report.add_attachment(returned)
    assert "ours-1@shop.example" in bounced_message_ids(report)


def test_message_ids_in_order_without_brackets():
    assert message_ids("<a@x> <b@y>\n <c@z>") == ["a@x", "b@y", "c@z"]
    assert message_ids("bare@x") == ["bare@x"]
    assert message_ids("") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Yes, please cancel it.\n\nOn Sun, 29 Nov 2026 at 10:00, Trail Shop "
            "<support@shop.example> wrote:\n> Just to confirm: shall I go ahead?\n",
            "Yes, please cancel it.",
        ),
        (
            "Sí, cancélalo.\n\nEl dom, 29 nov 2026 a las 10:00, Trail Shop "
            "(<support@shop.example>) escribió:\n> ¿Sigo adelante?\n",
            "Sí, cancélalo.",
        ),
        (
            "Ja, bitte.\n\nAm So., 29. Nov. 2026 um 10:00 Uhr schrieb Trail Shop "
            "<support@shop.example>:\n> Soll ich?\n",
            "Ja, bitte.",
        ),
        (
            "Oui merci\n\n-----Original Message-----\nFrom: Trail Shop\nSent: Sunday\n"
            "Subject: Re: commande\n\nVoulez-vous ?\n",
            "Oui merci",
        ),
        (
            "Please cancel TH-12345.\n\n-- \nAna García\n+34 600 000 000\n",
            "Please cancel TH-12345.",
        ),
        (
            "Two orders:\n- TH-12345\n- TH-12346\nThanks",
            "Two orders:\n- TH-12345\n- TH-12346\nThanks",
        ),
        ("> only the quote\n> nothing new\n", ""),
        ("", ""),
    ],
)
def test_the_new_text_of_a_reply(text, expected):
    assert new_text(text=text, html="") == expected


def test_html_becomes_text_without_markup_or_scripts():
    html = (
        "<html><head><style>p{color:red}</style></head><body><p>Where is <b>my order</b>?</p>"
        "<script>steal()</script><blockquote>old quoted mail</blockquote><p>Thanks</p></body>"
    )
    text = html_to_text(html)
    assert "Where is my order?" in text and "Thanks" in text
    assert "<" not in text and "steal" not in text and "color" not in text and "old" not in text
    assert new_text(text="", html=html).startswith("Where is my order?")
