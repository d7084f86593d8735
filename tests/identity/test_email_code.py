"""The e-mail one-time code: sent to the address a tool returns (never one the visitor typed),
checked before any LLM call, limited, per tenant, and never shown to the model."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create
from apps.identity.models import ChallengeStatus, EmailCodeChallenge
from apps.identity.services import (
    REDACTED,
    CheckStatus,
    OfferStatus,
    find_code,
    mask_email,
    otp_check,
    otp_offer,
    redact_codes,
)
from apps.reasoning.models import ReasoningTrace
from tests.support.shop import assess

pytestmark = pytest.mark.django_db
ALL = "test reads the database directly"


def sent_code(to: str) -> str:
    """The code of the last e-mail sent to `to`."""
    for message in reversed(mail.outbox):
        if message.to == [to]:
            found = re.search(r"\b(\d{6})\b", message.body)
            assert found, message.body
            return found.group(1)
    raise AssertionError(f"no e-mail to {to}: {[m.to for m in mail.outbox]}")


def other_code(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def test_the_code_goes_to_the_address_on_file_not_to_the_one_the_visitor_typed(
    shop, conversation, hook
):
    from apps.identity.selectors import email_code_enabled

    assert email_code_enabled(client=shop)
    offer = otp_offer(
        client=shop,
        conversation=conversation,
        params={"order_id": "TH-12345", "email": "mallory@evil.example"},
    )
    assert offer.status == OfferStatus.SENT
    assert [m.to for m in mail.outbox] == [["jane@example.com"]]
    assert "mallory" not in mail.outbox[0].body
    # The lookup ran through the webhook executor with the customer's details.
    assert [(r.tool, r.params["order_id"]) for r in hook.requests] == [("order_status", "TH-12345")]
    # The customer is told where it went — masked, never in full.
    assert "j***@example.com" in offer.message
    assert "jane@example.com" not in offer.message
    challenge = EmailCodeChallenge.objects.for_client(shop).get()
    assert (challenge.email, challenge.customer_ref) == ("jane@example.com", "C-42")
    code = sent_code("jane@example.com")
    assert code not in challenge.code_hash and len(challenge.code_hash) == 64  # a hash only
    lifetime = challenge.expires_at - challenge.created_at
    assert timedelta(minutes=9, seconds=59) < lifetime <= timedelta(minutes=10)


def test_no_code_without_an_address_on_file_or_for_an_unknown_order(shop, conversation):
    missing = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-99999"})
    unknown = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-00000"})
    invalid = otp_offer(client=shop, conversation=conversation, params={"email": "me@x.example"})
    assert [missing.status, unknown.status, invalid.status] == [
        OfferStatus.NOT_FOUND,
        OfferStatus.NOT_FOUND,
        OfferStatus.INVALID_PARAMS,
    ]
    assert mail.outbox == []
    assert not EmailCodeChallenge.objects.for_client(shop).exists()


def test_a_shop_without_the_setting_sends_nothing(db, hook):
    from apps.identity.selectors import email_code_enabled
    from tests.identity.conftest import make_shop

    bare = make_shop("bare", hook.url(), configure=False)
    assert not email_code_enabled(client=bare)
    conversation = conversation_create(client=bare)[0]
    offer = otp_offer(client=bare, conversation=conversation, params={"order_id": "TH-12345"})
    assert offer.status == OfferStatus.NOT_CONFIGURED
    assert mail.outbox == [] and hook.requests == []


def test_the_email_and_the_reply_speak_the_conversations_language(shop):
    conversation = conversation_create(client=shop, language="es")[0]
    offer = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    assert "He enviado un código de 6 dígitos a j***@example.com" in offer.message
    assert mail.outbox[0].subject == f"{shop.name}: su código de verificación"
    assert "Su código para confirmar que es usted en el chat con" in mail.outbox[0].body


def test_the_correct_code_typed_in_the_chat_verifies_without_any_llm_call(
    chat, shop, conversation, llm
):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    replies = chat.say(f"here it is: {code}")
    assert [r.text for r in replies] == ["Thank you — you're verified as j***@example.com."]
    assert llm.requests == []
    conversation.refresh_from_db()
    assert conversation.customer_verified
    assert conversation.customer_email == "jane@example.com"
    assert conversation.customer_id == "C-42"
    assert conversation.customer_verified_via == "email_code"
    # Stored first, with the code masked; the turn is on record without a model call.
    typed = chat.all(role="user")[-1]
    assert typed.text == f"here it is: {REDACTED}"
    assert typed.data["email_code"] == {"result": "verified", "address": "j***@example.com"}
    trace = ReasoningTrace.objects.for_client(shop).get(user_message=typed)
    assert trace.llm_calls == 0 and trace.status == "done"
    assert EmailCodeChallenge.objects.for_client(shop).get().status == ChallengeStatus.VERIFIED


def test_without_an_id_in_the_result_the_verified_id_is_the_address(shop, conversation):
    from apps.identity.services import email_code_setting_save

    email_code_setting_save(client=shop, tool_name="order_status", email_field="customer.email")
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    result = otp_check(client=shop, conversation=conversation, code=sent_code("jane@example.com"))
    assert result.verified
    conversation.refresh_from_db()
    assert conversation.customer_id == "jane@example.com"


def test_five_wrong_codes_kill_the_challenge(chat, shop, conversation, llm):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    wrong = other_code(code)
    texts = [chat.say(wrong)[-1].text for _ in range(5)]
    assert texts[:4] == [
        "That code isn't right. You have 4 more tries.",
        "That code isn't right. You have 3 more tries.",
        "That code isn't right. You have 2 more tries.",
        "That code isn't right. You have 1 more try.",
    ]
    assert "last try" in texts[4]
    assert llm.requests == []
    challenge = EmailCodeChallenge.objects.for_client(shop).get()
    assert (challenge.status, challenge.attempts) == (ChallengeStatus.EXHAUSTED, 5)
    # The right code now opens nothing: brute force ends at five guesses.
    assert otp_check(client=shop, conversation=conversation, code=code).status == "no_code"
    conversation.refresh_from_db()
    assert not conversation.customer_verified


def test_a_code_expires_after_ten_minutes(shop, conversation, monkeypatch):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    sent_at = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: sent_at + timedelta(minutes=10, seconds=1))
    result = otp_check(client=shop, conversation=conversation, code=code)
    assert result.status == CheckStatus.EXPIRED
    assert "expired" in result.message
    conversation.refresh_from_db()
    assert not conversation.customer_verified
    assert EmailCodeChallenge.objects.for_client(shop).get().status == ChallengeStatus.EXPIRED


def test_a_code_just_inside_ten_minutes_still_works(shop, conversation, monkeypatch):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    sent_at = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: sent_at + timedelta(minutes=9, seconds=50))
    assert otp_check(client=shop, conversation=conversation, code=code).verified


def test_a_new_code_replaces_the_old_one(shop, conversation):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    first = sent_code("jane@example.com")
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    second = sent_code("jane@example.com")
    if first != second:
        result = otp_check(client=shop, conversation=conversation, code=first)
        assert result.status == CheckStatus.WRONG
    assert otp_check(client=shop, conversation=conversation, code=second).verified


def test_at_most_three_codes_per_address_per_hour(shop, settings):
    assert settings.EMAIL_CODES_PER_ADDRESS_PER_HOUR == 3
    statuses = []
    for n in range(4):  # four visitors, one address
        conversation = conversation_create(client=shop, visitor_id=f"v{n}")[0]
        offer = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
        statuses.append(offer.status)
    assert statuses == [OfferStatus.SENT] * 3 + [OfferStatus.ADDRESS_LIMIT]
    assert len(mail.outbox) == 3
    assert "last hour" in offer.message
    # Another address is not held back by this one.
    conversation = conversation_create(client=shop, visitor_id="v9")[0]
    offer = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-22222"})
    assert offer.sent


def test_at_most_five_codes_per_visitor_per_hour(shop, conversation, hook, settings):
    assert settings.EMAIL_CODES_PER_VISITOR_PER_HOUR == 5
    orders = ["TH-12345", "TH-22222", "TH-33333", "TH-44444", "TH-55555"]
    for order in orders:
        assert otp_offer(client=shop, conversation=conversation, params={"order_id": order}).sent
    lookups = len(hook.requests)
    over = otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-66666"})
    assert over.status == OfferStatus.VISITOR_LIMIT
    assert len(hook.requests) == lookups  # refused before the lookup: no probing
    # The same visitor in a new conversation (same widget visitor id) is still held back.
    again = conversation_create(client=shop, visitor_id=conversation.visitor_id)[0]
    over = otp_offer(client=shop, conversation=again, params={"order_id": "TH-66666"})
    assert over.status == OfferStatus.VISITOR_LIMIT
    assert len(mail.outbox) == 5
    # An hour later the visitor may ask again.
    an_hour_ago = timezone.now() - timedelta(hours=1, minutes=1)
    EmailCodeChallenge.objects.for_client(shop).update(created_at=an_hour_ago)
    assert otp_offer(client=shop, conversation=again, params={"order_id": "TH-66666"}).sent


def test_another_tenants_code_never_verifies_a_conversation(
    shop, other_shop, conversation, chat, llm
):
    theirs = conversation_create(client=other_shop)[0]
    otp_offer(client=other_shop, conversation=theirs, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    # Shop A's conversation has no challenge: B's code checks against nothing of A's.
    assert otp_check(client=shop, conversation=conversation, code=code).status == "no_code"
    # Nor can A's client reach B's conversation.
    with pytest.raises(ValueError, match="another client"):
        otp_check(client=shop, conversation=theirs, code=code)
    with pytest.raises(ValueError, match="another client"):
        otp_offer(client=shop, conversation=theirs, params={"order_id": "TH-12345"})
    # A's own challenge does not accept B's code either.
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    mine = sent_code("jane@example.com")
    if mine != code:
        llm.script("assess", assess(response="ok"))
        assert otp_check(client=shop, conversation=conversation, code=code).status == "wrong"
    for row in Conversation.objects.unscoped(ALL).filter(pk__in=[conversation.pk, theirs.pk]):
        assert not row.customer_verified
    theirs_challenge = EmailCodeChallenge.objects.for_client(other_shop).get()
    assert (theirs_challenge.status, theirs_challenge.attempts) == (ChallengeStatus.OPEN, 0)


def test_the_code_never_reaches_the_llm(chat, shop, conversation, llm):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    chat.say(f"My code is {code[:3]} {code[3:]}")  # split, as people type it
    conversation.refresh_from_db()
    assert conversation.customer_verified
    llm.script("assess", assess(response="Your order TH-12345 has shipped."))
    replies = chat.say("Thanks! Where is my order TH-12345?")
    assert [r.text for r in replies] == ["Your order TH-12345 has shipped."]
    assert len(llm.requests) == 1
    prompt = llm.requests[0].prompt_text
    assert "Where is my order TH-12345?" in prompt  # the history did reach the model
    assert REDACTED in prompt  # the code's message, masked
    assert code not in prompt and f"{code[:3]} {code[3:]}" not in prompt
    stored = " ".join(m.text for m in Message.objects.for_client(shop).all())
    assert code not in stored and f"{code[:3]} {code[3:]}" not in stored


def test_a_code_in_arabic_indic_digits_is_recognised(shop, conversation):
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    code = sent_code("jane@example.com")
    arabic = "".join(chr(0x0660 + int(d)) for d in code)
    assert find_code(f"الرمز {arabic}") == code
    assert arabic not in redact_codes(f"الرمز {arabic}")
    assert otp_check(client=shop, conversation=conversation, code=arabic).verified


def test_numbers_that_are_not_codes_are_left_alone():
    assert find_code("order TH-1234567 for 12 items") is None
    assert redact_codes("call 0123456789") == "call 0123456789"
    assert mask_email("jane@example.com") == "j***@example.com"


def test_without_an_open_challenge_six_digits_are_just_text(chat, llm):
    llm.script("assess", assess(response="Let me check order 123456."))
    replies = chat.say("what about order 123456?")
    assert [r.text for r in replies] == ["Let me check order 123456."]
    assert chat.all(role="user")[-1].text == "what about order 123456?"
    assert "123456" in llm.requests[0].prompt_text


def test_erasing_the_conversation_deletes_its_challenges(shop, conversation):
    from apps.privacy.services import conversations_erase

    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    assert EmailCodeChallenge.objects.for_client(shop).count() == 1
    conversations_erase(client=shop, conversation_ids=[conversation.pk])
    assert EmailCodeChallenge.objects.for_client(shop).count() == 0


def test_the_hourly_task_deletes_codes_older_than_a_day(shop, other_shop, conversation, settings):
    from apps.identity.tasks import purge_email_codes

    entry = settings.CELERY_BEAT_SCHEDULE["identity-purge-email-codes"]
    assert (entry["task"], entry["schedule"]) == (purge_email_codes.name, 3600)
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    theirs = conversation_create(client=other_shop)[0]
    otp_offer(client=other_shop, conversation=theirs, params={"order_id": "TH-22222"})
    old = EmailCodeChallenge.objects.for_client(other_shop)
    old.update(created_at=timezone.now() - timedelta(hours=24, minutes=1))
    assert purge_email_codes.apply().get() == 1
    assert not EmailCodeChallenge.objects.for_client(other_shop).exists()
    assert EmailCodeChallenge.objects.for_client(shop).count() == 1  # a fresh one stays


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_cannot_slip_past_the_address_limit(hook):
    from django.db import close_old_connections, connection

    from tests.identity.conftest import make_shop

    if connection.vendor == "sqlite":
        pytest.skip("SQLite locks the whole database: two writers cannot race (run on PostgreSQL)")
    shop = make_shop("race", hook.url())
    for n in range(2):  # one code left for this address this hour
        conversation = conversation_create(client=shop, visitor_id=f"early-{n}")[0]
        assert otp_offer(
            client=shop, conversation=conversation, params={"order_id": "TH-12345"}
        ).sent
    racers = [conversation_create(client=shop, visitor_id=f"racer-{n}")[0] for n in range(4)]
    barrier = threading.Barrier(len(racers))
    statuses: list[str] = []

    def ask(conversation: Conversation) -> None:
        try:
            barrier.wait()
            offer = otp_offer(
                client=shop, conversation=conversation, params={"order_id": "TH-12345"}
            )
            statuses.append(offer.status)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=ask, args=(c,)) for c in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sorted(statuses) == [OfferStatus.ADDRESS_LIMIT] * 3 + [OfferStatus.SENT]
    assert EmailCodeChallenge.objects.for_client(shop).count() == 3
    assert len(mail.outbox) == 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_wrong_codes_each_use_a_try(hook):
    from django.db import close_old_connections, connection

    from tests.identity.conftest import make_shop

    if connection.vendor == "sqlite":
        pytest.skip("SQLite locks the whole database: two writers cannot race (run on PostgreSQL)")
    shop = make_shop("guess", hook.url())
    conversation = conversation_create(client=shop)[0]
    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    wrong = other_code(sent_code("jane@example.com"))
    barrier = threading.Barrier(8)
    statuses: list[str] = []

    def guess() -> None:
        try:
            barrier.wait()
            statuses.append(otp_check(client=shop, conversation=conversation, code=wrong).status)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=guess) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    # Five tries in all, however fast they come: four "wrong", one "exhausted", then nothing.
    assert sorted(statuses) == sorted(
        [CheckStatus.WRONG] * 4 + [CheckStatus.EXHAUSTED] + [CheckStatus.NO_CODE] * 3
    )
    challenge = EmailCodeChallenge.objects.for_client(shop).get()
    assert (challenge.status, challenge.attempts) == (ChallengeStatus.EXHAUSTED, 5)
