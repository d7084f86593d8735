"""Flag and teach: staff flag the assistant's replies; a correction, or a staff reply, becomes a
proposal in the insights review flow, and reaches the assistant's prompt only once approved; a
flagged conversation becomes a simulation test case. API, console, roles and tenants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client as DjangoClient

from apps.accounts.models import Role as StaffRole
from apps.conversations.models import Kind, Message, Role, Visibility
from apps.conversations.services import conversation_create, message_append
from apps.core.exceptions import ApplicationError
from apps.flags.models import MessageFlag
from apps.insights.models import InsightProposal, ProposalKind, ProposalOrigin, ProposalStatus
from apps.insights.services import proposal_approve
from apps.insights.teach import flag_and_teach, staff_reply_teach
from apps.knowledge.models import Article, ArticleStatus
from apps.notes.models import NoteStatus
from apps.simulations.models import SimCase
from apps.simulations.schema import case_validate
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for
from tests.factories import MembershipFactory
from tests.support.broker import NEEDS_REDIS
from tests.support.messages import internal_message
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

QUESTION = "Can I return boots after 40 days?"
BAD = "No, returns are accepted within 30 days only."
FIX = "Boots can be returned within 60 days of delivery, unworn, with the receipt."


def unscoped(model: Any) -> Any:
    return model.objects.unscoped("test checks the database directly")


def answered(client: Any, question: str = QUESTION, reply: str = BAD) -> tuple[Any, Message]:
    """A conversation where the customer asked `question` and the assistant answered `reply`."""
    conv, _ = conversation_create(client=client)
    message_append(client=client, conversation=conv, role=Role.USER, text="Hello")
    message_append(client=client, conversation=conv, role=Role.ASSISTANT, text="Hi! How can I?")
    message_append(client=client, conversation=conv, role=Role.USER, text=question)
    internal_message(conv, Kind.ASSESSMENT, "Confidence 8/10")
    message = message_append(client=client, conversation=conv, role=Role.ASSISTANT, text=reply)
    return conv, message


def console_as(client: Any, role: str) -> DjangoClient:
    """A signed-in console session of a new staff member with `role` in `client`."""
    browser = DjangoClient()
    browser.force_login(MembershipFactory(client=client, role=role).user)
    return browser


def prompt_text(llm: Any) -> str:
    return json.dumps([r.messages for r in llm.requests], ensure_ascii=False)


# -- the service -----------------------------------------------------------------------------


def test_a_flag_without_teaching_is_only_a_record(client_a):
    conv, message = answered(client_a)
    flag, proposal = flag_and_teach(client=client_a, message=message, reason="unhelpful")
    assert proposal is None
    assert (flag.conversation_id, flag.message_id) == (conv.pk, message.pk)
    assert flag.reason == "unhelpful"
    assert not unscoped(InsightProposal).exists()


@pytest.mark.parametrize(
    ("role", "kind", "visibility"),
    [
        (Role.USER, Kind.TEXT, Visibility.VISIBLE),
        (Role.STAFF, Kind.TEXT, Visibility.VISIBLE),
        (Role.ASSISTANT, Kind.ASSESSMENT, Visibility.INTERNAL),
    ],
)
def test_only_the_assistants_visible_replies_can_be_flagged(client_a, role, kind, visibility):
    conv, _ = conversation_create(client=client_a)
    message = message_append(
        client=client_a, conversation=conv, role=role, kind=kind, visibility=visibility, text="x"
    )
    with pytest.raises(ApplicationError) as raised:
        flag_and_teach(client=client_a, message=message, reason="wrong")
    assert "message" in raised.value.extra["fields"]
    assert not unscoped(MessageFlag).exists()


def test_teaching_needs_a_correction(client_a):
    _, message = answered(client_a)
    with pytest.raises(ApplicationError) as raised:
        flag_and_teach(client=client_a, message=message, reason="wrong", teach_as="faq")
    assert "correction" in raised.value.extra["fields"]
    assert not unscoped(MessageFlag).exists()  # all or nothing


def test_a_flag_with_a_correction_becomes_an_faq_proposal(client_a):
    conv, message = answered(client_a)
    user = MembershipFactory(client=client_a).user
    flag, proposal = flag_and_teach(
        client=client_a, message=message, reason="wrong", correction=FIX, teach_as="faq", actor=user
    )
    assert flag.flagged_by == user and flag.correction == FIX
    assert proposal is not None
    assert (proposal.kind, proposal.origin, proposal.status) == (
        ProposalKind.FAQ,
        ProposalOrigin.FLAG,
        ProposalStatus.PENDING_REVIEW,
    )
    assert proposal.question == QUESTION and proposal.answer == FIX
    assert proposal.flag == flag and proposal.conversation_ids == [str(conv.public_id)]
    assert not unscoped(Article).exists()  # nothing published before approval
    proposal_approve(client=client_a, proposal=proposal, actor=user)
    article = unscoped(Article).get(title=QUESTION)
    assert (article.title, article.body, article.status) == (QUESTION, FIX, ArticleStatus.PUBLISHED)


def test_an_article_proposal_carries_an_outline_to_draft_from(client_a):
    _, message = answered(client_a)
    _, proposal = flag_and_teach(
        client=client_a, message=message, reason="wrong", correction=FIX, teach_as="article"
    )
    assert proposal is not None and proposal.kind == ProposalKind.ARTICLE
    assert proposal.questions == [QUESTION] and FIX in proposal.outline


def test_a_corrections_note_reaches_no_prompt_before_approval_and_does_after(chat, llm):
    shop = chat.client
    llm.script("assess", assess(response="Returns are accepted within 30 days."))
    chat.say(QUESTION)
    flagged = chat.all(role=Role.ASSISTANT, visibility=Visibility.VISIBLE)[-1]
    _, proposal = flag_and_teach(
        client=shop, message=flagged, reason="wrong", correction=FIX, teach_as="note"
    )
    assert proposal is not None and proposal.note is not None
    assert proposal.note.status == NoteStatus.PENDING_REVIEW

    llm.requests.clear()
    llm.script("assess", assess(response="Let me check."))
    chat.say("And sandals?")
    assert llm.requests and FIX not in prompt_text(llm)

    proposal_approve(client=shop, proposal=proposal)
    llm.requests.clear()
    llm.script("assess", assess(response="60 days."))
    chat.say("And boots again?")
    assert FIX in prompt_text(llm)


def test_a_staff_reply_after_a_hand_off_becomes_an_faq_proposal_once(client_a):
    conv, _ = answered(client_a)
    message_append(client=client_a, conversation=conv, role=Role.USER, text="Is that right?")
    reply = message_append(client=client_a, conversation=conv, role=Role.STAFF, text=FIX)
    proposal = staff_reply_teach(client=client_a, message=reply)
    assert (proposal.kind, proposal.origin, proposal.source_message) == (
        ProposalKind.FAQ,
        ProposalOrigin.STAFF_REPLY,
        reply,
    )
    assert proposal.question == "Is that right?" and proposal.answer == FIX
    assert staff_reply_teach(client=client_a, message=reply).pk == proposal.pk
    assert unscoped(InsightProposal).count() == 1


def test_only_a_staff_reply_can_be_taught_from(client_a):
    _, message = answered(client_a)
    with pytest.raises(ApplicationError):
        staff_reply_teach(client=client_a, message=message)


# -- simulation cases ------------------------------------------------------------------------


def test_a_flagged_conversation_becomes_a_valid_test_case(client_a):
    from apps.simulations.cases import simcase_from_flag

    _, message = answered(client_a)
    flag, _ = flag_and_teach(client=client_a, message=message, reason="wrong", correction=FIX)
    case = simcase_from_flag(client=client_a, flag=flag)
    assert case.suite == "flagged" and case.tags == ["flagged", "wrong"]
    assert case.history == [
        {"role": "user", "text": "Hello"},
        {"role": "assistant", "text": "Hi! How can I?"},
    ]
    assert case.turns == [{"customer": QUESTION, "expect": {}}]
    assert any(FIX in c for c in case.criteria) and any(BAD in c for c in case.criteria)
    case_validate({"name": case.name, "history": case.history, "turns": case.turns})
    again = simcase_from_flag(client=client_a, flag=flag)
    assert again.pk == case.pk and unscoped(SimCase).count() == 1


# -- the API ---------------------------------------------------------------------------------


def test_the_api_flags_teaches_lists_and_saves_a_case(client_a):
    conv, message = answered(client_a)
    agent = session_for(client_a, StaffRole.AGENT)
    created = agent.post(
        "/api/v1/flags/",
        {"message": str(message.public_id), "reason": "wrong", "correction": FIX}
        | {"teach_as": "faq"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["reason"] == "wrong" and body["flagged_by"] == agent.staff_user.email
    assert body["proposal"]["kind"] == "faq" and body["proposal"]["status"] == "pending_review"
    listed = agent.get(f"/api/v1/flags/?conversation={conv.public_id}").json()["results"]
    assert [f["id"] for f in listed] == [body["id"]]
    assert agent.get(f"/api/v1/flags/{body['id']}/").json()["correction"] == FIX
    saved = agent.post(f"/api/v1/flags/{body['id']}/simulation-case")
    assert saved.status_code == 201 and saved.json()["suite"] == "flagged"


def test_the_api_refuses_a_customer_message(client_a):
    conv, _ = answered(client_a)
    customer = unscoped(Message).filter(conversation=conv, role=Role.USER).first()
    agent = key_for(client_a, StaffRole.AGENT)
    response = agent.post(
        "/api/v1/flags/", {"message": str(customer.public_id), "reason": "wrong"}, format="json"
    )
    assert assert_error(response, 400, "invalid")["fields"]["message"]


def test_a_viewer_cannot_flag_teach_or_save_a_case(client_a):
    conv, message = answered(client_a)
    flag, _ = flag_and_teach(client=client_a, message=message, reason="wrong")
    reply = message_append(client=client_a, conversation=conv, role=Role.STAFF, text=FIX)
    viewer = key_for(client_a, StaffRole.VIEWER)
    assert viewer.get("/api/v1/flags/").status_code == 200
    assert_error(
        viewer.post(
            "/api/v1/flags/", {"message": str(message.public_id), "reason": "wrong"}, format="json"
        ),
        403,
    )
    teach = {"message": str(reply.public_id)}
    assert_error(viewer.post("/api/v1/teach/staff-replies", teach, format="json"), 403)
    assert_error(viewer.post(f"/api/v1/flags/{flag.public_id}/simulation-case"), 403)
    assert unscoped(MessageFlag).count() == 1
    assert not unscoped(InsightProposal).exists() and not unscoped(SimCase).exists()


def test_another_client_cannot_see_flag_or_teach_from_this_clients_messages(client_a, client_b):
    conv, message = answered(client_a)
    flag, _ = flag_and_teach(client=client_a, message=message, reason="wrong", correction=FIX)
    reply = message_append(client=client_a, conversation=conv, role=Role.STAFF, text=FIX)
    other = key_for(client_b, StaffRole.OWNER)
    assert other.get("/api/v1/flags/").json()["results"] == []
    assert_error(other.get(f"/api/v1/flags/{flag.public_id}/"), 404)
    assert_error(other.get(f"/api/v1/flags/?conversation={conv.public_id}"), 404)
    assert_error(
        other.post(
            "/api/v1/flags/", {"message": str(message.public_id), "reason": "wrong"}, format="json"
        ),
        404,
    )
    assert_error(
        other.post("/api/v1/teach/staff-replies", {"message": str(reply.public_id)}, format="json"),
        404,
    )
    assert_error(other.post(f"/api/v1/flags/{flag.public_id}/simulation-case"), 404)
    assert unscoped(MessageFlag).count() == 1
    assert not unscoped(InsightProposal).exists() and not unscoped(SimCase).exists()


# -- the console -----------------------------------------------------------------------------


def console_urls(conv: Any, message: Message) -> dict[str, str]:
    base = f"/console/conversations/{conv.public_id}/"
    return {
        "flags": base + "flags.json",
        "flag": base + f"messages/{message.public_id}/flag",
        "teach": base + f"messages/{message.public_id}/teach",
    }


def test_the_console_lists_replies_and_flags_them(client_a):
    conv, message = answered(client_a)
    agent = console_as(client_a, StaffRole.AGENT)
    urls = console_urls(conv, message)
    listing = agent.get(urls["flags"]).json()
    assert listing["can_act"] is True and listing["flags"] == []
    assert [(m["seq"], m["role"]) for m in listing["messages"]] == [
        (2, "assistant"),
        (message.seq, "assistant"),
    ]
    created = agent.post(urls["flag"], {"reason": "unsafe", "correction": FIX, "teach_as": "note"})
    assert created.status_code == 201, created.content
    proposal = created.json()["proposal"]
    assert proposal["kind"] == "note"
    assert proposal["review_url"].startswith("/admin/insights/insightproposal/")
    [flag] = agent.get(urls["flags"]).json()["flags"]
    assert (flag["seq"], flag["reason"], flag["correction"]) == (message.seq, "unsafe", FIX)
    saved = agent.post(flag["case_url"])
    assert saved.status_code == 201 and saved.json()["case"]["suite"] == "flagged"


def test_the_console_teaches_from_a_staff_reply(client_a):
    conv, _ = answered(client_a)
    reply = message_append(client=client_a, conversation=conv, role=Role.STAFF, text=FIX)
    agent = console_as(client_a, StaffRole.AGENT)
    response = agent.post(console_urls(conv, reply)["teach"])
    assert response.status_code == 201
    assert unscoped(InsightProposal).get().answer == FIX


def test_a_console_viewer_sees_flags_but_cannot_flag_or_teach(client_a):
    conv, message = answered(client_a)
    flag, _ = flag_and_teach(client=client_a, message=message, reason="wrong")
    viewer = console_as(client_a, StaffRole.VIEWER)
    urls = console_urls(conv, message)
    listing = viewer.get(urls["flags"]).json()
    assert listing["can_act"] is False and len(listing["flags"]) == 1
    assert viewer.post(urls["flag"], {"reason": "wrong"}).status_code == 403
    assert viewer.post(urls["teach"]).status_code == 403
    assert viewer.post(listing["flags"][0]["case_url"]).status_code == 403
    assert unscoped(MessageFlag).count() == 1 and not unscoped(SimCase).exists()
    assert flag.pk


def test_the_console_answers_404_for_another_clients_conversation(client_a, client_b):
    conv, message = answered(client_b)
    flag, _ = flag_and_teach(client=client_b, message=message, reason="wrong")
    agent = console_as(client_a, StaffRole.AGENT)  # of client A
    urls = console_urls(conv, message)
    assert agent.get(urls["flags"]).status_code == 404
    assert agent.post(urls["flag"], {"reason": "wrong"}).status_code == 404
    assert agent.post(f"/console/flags/{flag.public_id}/simulation-case").status_code == 404
    assert unscoped(MessageFlag).count() == 1 and not unscoped(SimCase).exists()


def test_the_conversation_page_includes_the_flag_tools(client_a):
    conv, _ = answered(client_a)
    page = console_as(client_a, StaffRole.VIEWER).get(f"/console/conversations/{conv.public_id}/")
    assert page.status_code == 200
    assert b"data-flag-dialog" in page.content and b"console/flags.js" in page.content


def test_flagged_answers_are_evidence_for_the_nightly_run(client_a, client_b):
    from datetime import timedelta

    from django.utils import timezone

    from apps.insights.selectors import insight_evidence

    conv, message = answered(client_a)
    flag_and_teach(client=client_a, message=message, reason="unsafe")
    _, other = answered(client_b)
    flag_and_teach(client=client_b, message=other, reason="wrong")
    now = timezone.now()
    items = insight_evidence(client=client_a, since=now - timedelta(hours=1), until=now)
    [item] = [i for i in items if i.kind == "flagged"]
    assert item.conversation == str(conv.public_id)
    assert item.text == QUESTION  # the customer's words the flagged reply answered
    assert item.detail == f"staff flagged the answer as unsafe: {BAD}"


def test_the_flagged_filter_keeps_the_conversations_with_a_flag(client_a, client_b):
    from apps.conversations.models import Conversation
    from apps.flags.selectors import conversations_flagged

    flagged, message = answered(client_a)
    quiet, _ = answered(client_a)
    flag_and_teach(client=client_a, message=message, reason="wrong")
    flag_and_teach(client=client_a, message=message, reason="unsafe")  # twice: listed once
    _, other = answered(client_b)
    flag_and_teach(client=client_b, message=other, reason="wrong")
    mine = Conversation.objects.for_client(client_a)
    assert list(conversations_flagged(client=client_a, queryset=mine)) == [flagged]
    assert list(conversations_flagged(client=client_a, queryset=mine, flagged=False)) == [quiet]


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "0", "%00", "a" * 300])
def test_malformed_ids_answer_404_never_500(client_a, bad_id):
    conv, _ = answered(client_a)
    agent = key_for(client_a, StaffRole.AGENT)
    assert_error(agent.get(f"/api/v1/flags/{bad_id}/"), 404)
    assert_error(agent.post(f"/api/v1/flags/{bad_id}/simulation-case"), 404)
    console = console_as(client_a, StaffRole.AGENT)
    base = f"/console/conversations/{conv.public_id}/messages/{bad_id}/"
    assert console.post(base + "flag", {"reason": "wrong"}).status_code == 404
    assert console.post(base + "teach").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "rude"}, "reason"),
        ({"reason": "wrong", "teach_as": "poem", "correction": "x"}, "teach_as"),
        ({"reason": "wrong", "correction": "x" * 2001}, "correction"),
        ({"reason": "wrong", "message": "nope"}, "message"),
    ],
)
def test_the_api_names_the_bad_field(client_a, body, field):
    _, message = answered(client_a)
    agent = key_for(client_a, StaffRole.AGENT)
    response = agent.post(
        "/api/v1/flags/", {"message": str(message.public_id)} | body, format="json"
    )
    assert field in assert_error(response, 400, "invalid")["fields"]
    assert not unscoped(MessageFlag).exists()


@NEEDS_REDIS
def test_a_flag_rings_the_conversations_and_the_clients_doorbells(
    client_a, settings, django_capture_on_commit_callbacks
):
    import redis

    settings.REDIS_URL = settings.TEST_BROKER_URL
    conv, message = answered(client_a)
    listener = redis.Redis.from_url(settings.REDIS_URL).pubsub()
    listener.psubscribe("*")
    listener.get_message(timeout=1)  # the subscription confirmation
    with django_capture_on_commit_callbacks(execute=True):
        flag_and_teach(client=client_a, message=message, reason="wrong")
    heard = [listener.get_message(timeout=2) for _ in range(3)]
    payloads = {(m["channel"].decode(), m["data"]) for m in heard if m and m["type"] == "pmessage"}
    assert any(
        channel.endswith(str(conv.pk)) and data == f"c{client_a.pk}".encode()
        for channel, data in payloads
    )


def test_a_staff_reply_to_several_messages_is_approved_as_one_faq(client_a):
    conv, _ = conversation_create(client=client_a)
    for text in ("Hi, I bought boots 40 days ago.", QUESTION):
        message_append(client=client_a, conversation=conv, role=Role.USER, text=text)
    reply = message_append(client=client_a, conversation=conv, role=Role.STAFF, text=FIX)
    proposal = staff_reply_teach(client=client_a, message=reply)
    assert proposal.question == f"Hi, I bought boots 40 days ago. {QUESTION}"
    proposal_approve(client=client_a, proposal=proposal)
    article = unscoped(Article).get(body=FIX)
    assert article.title == proposal.question and article.status == ArticleStatus.PUBLISHED
