"""The console's inbox: every conversation with a readable title and its state, the filters
and search, and the actions on one conversation (take over, assign / claim, hand back, notes)
— tenant-scoped, viewers read-only."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.console.inbox_selectors import conversation_title
from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Visibility
from apps.conversations.models import Role as MessageRole
from apps.conversations.services import conversation_create, message_append
from apps.escalations.models import Escalation, EscalationStatus
from apps.escalations.services import conversation_assign, escalation_create
from apps.reasoning.models import ReasoningTrace, TraceStatus
from tests.api.conftest import make_conversation_with_turn
from tests.factories import MembershipFactory
from tests.support.rows import client_rows

pytestmark = pytest.mark.django_db

INBOX = reverse("console-queue")
POLL = reverse("console-inbox-poll")


def action(conversation: Conversation, name: str) -> str:
    return reverse(f"console-conversation-{name}", args=[conversation.public_id])


def rows(browser, **params) -> list[dict]:
    response = browser.get(POLL, params)
    assert response.status_code == 200, response.content
    return response.json()["rows"]


def titles(browser, **params) -> list[str]:
    return [r["title"] for r in rows(browser, **params)]


def chat(client: Client, text: str, email: str = "") -> Conversation:
    conversation, _ = conversation_create(client=client, visitor_id="v")
    message_append(client=client, conversation=conversation, role=MessageRole.USER, text=text)
    message_append(
        client=client, conversation=conversation, role=MessageRole.ASSISTANT, text="Sure!"
    )
    if email:
        conversation.contact_email = email
        conversation.save(update_fields=["contact_email"])
    return conversation


def snapshot(client: Client) -> list[tuple]:
    return client_rows(Conversation, client, "pk", "status", "assignee", "last_seq")


# --------------------------------------------------------------------------- the list


def test_the_inbox_lists_every_conversation_latest_first_with_readable_titles(
    agent, client_a, client_b
):
    first = chat(client_a, "Where is my parcel? It was due on Monday and nothing came yet")
    second = chat(client_a, "Cancel order TH-1", email="ana@example.com")
    chat(client_b, "Globex's secret question")
    assert titles(agent) == [
        "Cancel order TH-1",  # the subject; who wrote it is the customer column's
        "Where is my parcel? It was due on…",
    ]
    assert [r["customer"]["email"] for r in rows(agent)] == ["ana@example.com", ""]
    page = agent.get(INBOX).content.decode()
    assert "ana@example.com" in page and "Where is my parcel?" in page
    assert "Globex" not in page.split("<main", 1)[1]
    assert str(first.public_id) in page and str(second.public_id) in page  # in the links


def test_a_long_first_message_is_cut_to_a_title():
    conversation = Conversation(public_id="12345678-1234-1234-1234-123456789012")
    assert conversation_title(conversation, "x" * 300).endswith("…")
    assert len(conversation_title(conversation, "x" * 300)) == 60
    assert conversation_title(conversation, "") == "Conversation 12345678"


def test_states_and_the_state_filter(agent, client_a):
    assistant = chat(client_a, "Assistant handles me")
    waiting = chat(client_a, "Waiting for a person")
    escalation_create(client=client_a, conversation=waiting, reason="customer_request")
    teammate = chat(client_a, "A teammate has me")
    escalation_create(client=client_a, conversation=teammate, reason="policy")
    colleague = MembershipFactory(client=client_a, role=Role.AGENT).user
    conversation_assign(client=client_a, conversation=teammate, assignee=colleague)
    idle = chat(client_a, "Old and quiet")
    Conversation.objects.for_client(client_a).filter(pk=idle.pk).update(
        last_message_at=timezone.now() - timedelta(days=2)
    )
    states = {r["title"]: r["state"] for r in rows(agent)}
    assert states == {
        "Assistant handles me": "assistant",
        "Waiting for a person": "waiting",
        "A teammate has me": "teammate",
        "Old and quiet": "resolved",
    }
    for state, title in [
        ("assistant", assistant),
        ("waiting", waiting),
        ("teammate", teammate),
        ("resolved", idle),
    ]:
        assert [r["id"] for r in rows(agent, state=state)] == [str(title.public_id)]
    assert agent.get(POLL, {"state": "waiting"}).json()["waiting"] == 1


def test_assignee_filter_me_none_and_a_teammate(browser_for, client_a):
    me = browser_for(Role.AGENT)
    mine = chat(client_a, "Mine")
    conversation_assign(client=client_a, conversation=mine, assignee=me.staff_user)
    nobodys = chat(client_a, "Nobody's")
    assert titles(me, assignee="me") == ["Mine"]
    assert titles(me, assignee="none") == ["Nobody's"]
    assert titles(me, assignee=str(me.staff_user.pk)) == ["Mine"]
    assert nobodys  # listed under "none"


def test_mode_and_tool_filters(agent, client_a, data_a):
    # data_a: an escalated conversation whose adaptive turn ran lookup_order, and a quiet one
    assert set(titles(agent, tool="lookup_order")) == {"Where is my order?"}
    assert set(titles(agent, mode="adaptive")) == {"Where is my order?", "Do you ship abroad?"}
    assert titles(agent, mode="deliberative") == []
    assert titles(agent, tool="refund") == []
    page = agent.get(INBOX).content.decode()
    assert '<option value="lookup_order"' in page and '<option value="adaptive"' in page


def test_search_by_email_and_message_text(agent, client_a, client_b):
    chat(client_a, "My blue kettle leaks", email="kettle@example.com")
    chat(client_a, "Refund for order TH-10042 please")
    chat(client_b, "Another tenant's kettle")
    assert titles(agent, q="KETTLE@example") == ["My blue kettle leaks"]
    assert titles(agent, q="th-10042") == ["Refund for order TH-10042 please"]
    assert titles(agent, q="kettle") == ["My blue kettle leaks"]  # B's never
    assert titles(agent, q="nothing like this") == []


def test_the_flagged_filter_is_offered(agent, client_a):
    chat(client_a, "Hello")
    page = agent.get(INBOX).content.decode()
    assert 'name="flagged"' in page


def test_pages_of_fifty(agent, client_a, monkeypatch):
    monkeypatch.setattr("apps.console.inbox_selectors.PAGE_SIZE", 2)
    for n in range(5):
        chat(client_a, f"Chat number {n}")
    first = agent.get(POLL).json()
    assert [r["title"] for r in first["rows"]] == ["Chat number 4", "Chat number 3"]
    assert first["has_next"] is True
    last = agent.get(POLL, {"page": "3"}).json()
    assert [r["title"] for r in last["rows"]] == ["Chat number 0"] and not last["has_next"]


def test_the_inbox_json_costs_the_same_queries_for_more_conversations(
    agent, client_a, django_assert_max_num_queries
):
    for n in range(3):
        chat(client_a, f"Chat {n}", email=f"c{n}@example.com" if n else "")
    agent.get(POLL)  # warm the session
    with django_assert_max_num_queries(8) as few:
        agent.get(POLL)
    for n in range(20):
        chat(client_a, f"More {n}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(rows(agent)) == 23


def test_the_inbox_is_the_consoles_entry_point_and_links_the_queue(agent, client_a):
    page = agent.get(INBOX).content.decode()
    assert 'id="gd-inbox"' in page
    assert reverse("console-escalations") in page
    assert f'data-events-url="{reverse("console-queue-events")}' in page


# --------------------------------------------------------------------------- actions


def test_take_over_from_the_conversation_page(agent, client_a, data_a):
    quiet = data_a.quiet_conversation
    page = agent.get(reverse("console-conversation", args=[quiet.public_id])).content.decode()
    assert 'data-action="takeover"' in page and "Do you ship abroad?" in page  # the title
    response = agent.post(action(quiet, "takeover"), follow=True)
    assert response.status_code == 200
    quiet.refresh_from_db()
    assert quiet.status == ConversationStatus.ESCALATED and quiet.assignee == agent.staff_user
    joined = Message.objects.for_client(client_a).get(conversation=quiet, kind=Kind.HANDOFF)
    assert joined.visibility == Visibility.VISIBLE and "joined" in joined.text
    body = response.content.decode()
    assert body.count('data-action="handback"') == 1 and "handback-quiet" not in body


def test_claim_and_assign_from_the_conversation_page(agent, client_a, data_a):
    conv = data_a.conversation
    agent.post(action(conv, "assign"), {"assignee": "me"})
    conv.refresh_from_db()
    assert conv.assignee == agent.staff_user
    colleague = MembershipFactory(client=client_a, role=Role.ADMIN).user
    agent.post(action(conv, "assign"), {"assignee": str(colleague.pk)})
    conv.refresh_from_db()
    assert conv.assignee == colleague
    assert Escalation.objects.for_client(client_a).get(pk=data_a.escalation.pk).assigned_to == (
        colleague
    )
    agent.post(action(conv, "assign"), {"assignee": ""})
    conv.refresh_from_db()
    assert conv.assignee is None


def test_claim_posts_with_the_assign_select_and_still_claims(agent, data_a):
    """The page's form sends the Claim button and the "Assign to" select together: the select's
    "Nobody" must not undo the claim."""
    conv = data_a.conversation
    page = agent.get(reverse("console-conversation", args=[conv.public_id])).content.decode()
    assert 'name="claim" value="me"' in page and '<select name="assignee"' in page
    response = agent.post(action(conv, "assign"), {"claim": "me", "assignee": ""}, follow=True)
    conv.refresh_from_db()
    assert conv.assignee == agent.staff_user
    assert "Nobody is assigned now." not in response.content.decode()


def test_a_viewer_or_another_clients_member_cannot_be_assigned(agent, client_a, client_b, data_a):
    conv = data_a.conversation
    viewer_user = MembershipFactory(client=client_a, role=Role.VIEWER).user
    outsider = MembershipFactory(client=client_b, role=Role.OWNER).user
    before = snapshot(client_a)
    for user in (viewer_user, outsider):
        response = agent.post(action(conv, "assign"), {"assignee": str(user.pk)}, follow=True)
        assert "Pick a teammate of this client." in response.content.decode()
    assert snapshot(client_a) == before


def _waiting(client: Client, conversation: Conversation) -> Message:
    message = message_append(
        client=client,
        conversation=conversation,
        role=MessageRole.USER,
        text="Yes please, order TH-10042",
    )
    ReasoningTrace.objects.create(
        client=client,
        conversation=conversation,
        user_message=message,
        mode="adaptive",
        status=TraceStatus.SKIPPED,
    )
    return message


def test_hand_back_answers_or_not(agent, client_a, data_a, django_capture_on_commit_callbacks):
    conv = data_a.conversation
    waiting = _waiting(client_a, conv)
    with django_capture_on_commit_callbacks(execute=False):
        agent.post(action(conv, "handback"), {"answer_waiting": "0"})
    assert ReasoningTrace.objects.for_client(client_a).get(user_message=waiting).status == (
        TraceStatus.SKIPPED
    )
    conv.refresh_from_db()
    assert conv.status == ConversationStatus.OPEN and conv.assignee is None

    other, _ = make_conversation_with_turn(client_a, "Help")
    escalation_create(client=client_a, conversation=other, reason="policy", notify=False)
    waiting_too = _waiting(client_a, other)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        agent.post(action(other, "handback"), {"answer_waiting": "1"})
    assert not ReasoningTrace.objects.for_client(client_a).filter(user_message=waiting_too).exists()
    assert queued  # the turn for the waiting message is queued on commit
    assert Escalation.objects.for_client(client_a).get(conversation=other).status == (
        EscalationStatus.RESOLVED
    )


def test_a_partial_refresh_leaves_the_flash_for_the_next_page(agent, client_a, data_a):
    # approvals.js re-fetches the conversation page as HTML when a message arrives — as one
    # does right after a hand-back. That render must not eat the flash the redirect will show.
    conv = data_a.conversation
    page = reverse("console-conversation", args=[conv.public_id])
    agent.post(action(conv, "handback"), {"answer_waiting": "0"})
    partial = agent.get(page, headers={"X-GuideDesk-Partial": "approvals"})
    assert partial.status_code == 200 and b"gd-flash" not in partial.content
    shown = agent.get(page).content.decode()
    assert 'class="gd-flash-success"' in shown and "Handed back" in shown
    assert 'class="gd-flash-success"' not in agent.get(page).content.decode()  # shown once


def test_a_staff_note_is_internal(agent, client_a, data_a):
    conv = data_a.quiet_conversation
    agent.post(action(conv, "note"), {"text": "Regular customer, be kind"})
    note = Message.objects.for_client(client_a).get(conversation=conv, kind=Kind.STAFF_NOTE)
    assert note.visibility == Visibility.INTERNAL and note.author == agent.staff_user
    conv.refresh_from_db()
    assert conv.status == ConversationStatus.OPEN
    response = agent.post(action(conv, "note"), {"text": "   "}, follow=True)
    assert "Write the note first." in response.content.decode()


# --------------------------------------------------------------------------- roles, tenants

ACTIONS = [
    ("takeover", {}),
    ("assign", {"assignee": "me"}),
    ("handback", {"answer_waiting": "1"}),
    ("note", {"text": "hello"}),
]


@pytest.mark.parametrize(("name", "body"), ACTIONS)
def test_a_viewer_cannot_act(viewer, client_a, data_a, name, body):
    before = (snapshot(client_a), Message.objects.for_client(client_a).count())
    for conv in (data_a.conversation, data_a.quiet_conversation):
        assert viewer.post(action(conv, name), body).status_code == 403
    assert (snapshot(client_a), Message.objects.for_client(client_a).count()) == before
    page = viewer.get(reverse("console-conversation", args=[data_a.quiet_conversation.public_id]))
    assert 'data-action="takeover"' not in page.content.decode()


@pytest.mark.parametrize(("name", "body"), ACTIONS)
def test_another_clients_staff_get_404_and_nothing_changes(
    browser_for, client_a, client_b, data_a, name, body
):
    b_admin = browser_for(Role.OWNER, client=client_b)
    before = (snapshot(client_a), Message.objects.for_client(client_a).count())
    for conv in (data_a.conversation, data_a.quiet_conversation):
        assert b_admin.post(action(conv, name), body).status_code == 404
    assert (snapshot(client_a), Message.objects.for_client(client_a).count()) == before
    assert data_a.conversation.public_id.hex not in b_admin.get(POLL).content.decode()
    assert rows(b_admin) == []


def test_a_common_word_is_searched_by_walking_the_inbox(agent, client_a, monkeypatch):
    """Past SEARCH_RARE_LIMIT matching messages the search walks the inbox in order, a chunk
    at a time: the same rows, in the same order, e-mail matches included."""
    monkeypatch.setattr("apps.console.inbox_selectors.SEARCH_RARE_LIMIT", 1)
    monkeypatch.setattr("apps.console.inbox_selectors.SEARCH_CHUNK", 2)
    chat(client_a, "My kettle is blue")
    chat(client_a, "Nothing to see")
    chat(client_a, "Hello", email="kettle-fan@example.com")
    chat(client_a, "Another KETTLE question")
    assert titles(agent, q="kettle") == [
        "Another KETTLE question",
        "Hello",  # found by its customer's e-mail
        "My kettle is blue",
    ]


# --------------------------------------------------------------------------- what a team works from


def test_conversations_waiting_for_staff_are_pinned_first_and_stand_out(agent, client_a):
    """A customer waiting for a person comes before any newer assistant conversation, longest
    waiting first, only on the first page; the row is marked for the highlight."""
    first_waiting = chat(client_a, "I need a person please")
    second_waiting = chat(client_a, "Agent! Now!")
    for conversation in (first_waiting, second_waiting):
        escalation_create(
            client=client_a, conversation=conversation, reason="customer_request", notify=False
        )
    for n in range(3):
        chat(client_a, f"Newer assistant chat {n}")
    listed = rows(agent)
    assert [r["title"] for r in listed] == [
        "I need a person please",
        "Agent! Now!",
        "Newer assistant chat 2",
        "Newer assistant chat 1",
        "Newer assistant chat 0",
    ]
    assert [r["waiting"] for r in listed] == [True, True, False, False, False]
    page = agent.get(INBOX).content.decode()
    pinned = re.search(rf'<tr data-conversation="{first_waiting.public_id}"[^>]*>', page)
    assert pinned and 'class="gd-row-waiting"' in pinned.group(0)
    assert page.index("I need a person please") < page.index("Newer assistant chat 2")
    # the state filter still lists the others alone
    assert titles(agent, state="assistant")[0] == "Newer assistant chat 2"


def test_pinned_rows_are_not_repeated_on_later_pages(agent, client_a, monkeypatch):
    monkeypatch.setattr("apps.console.inbox_selectors.PAGE_SIZE", 2)
    waiting = chat(client_a, "Waiting one")
    escalation_create(client=client_a, conversation=waiting, reason="policy", notify=False)
    for n in range(3):
        chat(client_a, f"Chat {n}")
    first = agent.get(POLL).json()
    assert [r["title"] for r in first["rows"]] == ["Waiting one", "Chat 2", "Chat 1"]
    assert first["has_next"] is True
    second = agent.get(POLL, {"page": "2"}).json()
    assert [r["title"] for r in second["rows"]] == ["Chat 0"] and not second["has_next"]


def test_the_customer_column_names_the_customer_and_says_if_verified(agent, client_a):
    verified = chat(client_a, "Where is order TH-7?")
    Conversation.objects.for_client(client_a).filter(pk=verified.pk).update(
        customer_id="cust-7",
        customer_name="Ana Ruiz",
        customer_email="ana@example.com",
        customer_verified_at=timezone.now(),
    )
    chat(client_a, "Do you ship to Oslo?", email="ola@example.no")
    chat(client_a, "Just browsing")
    customers = {r["title"]: r["customer"] for r in rows(agent)}
    assert customers == {
        "Where is order TH-7?": {"name": "Ana Ruiz", "email": "ana@example.com", "verified": True},
        "Do you ship to Oslo?": {"name": "", "email": "ola@example.no", "verified": False},
        "Just browsing": {"name": "", "email": "", "verified": False},
    }
    page = agent.get(INBOX).content.decode()
    assert "<th>Customer</th>" in page
    cells = re.findall(r"<td data-label=\"Customer\" data-customer>(.*?)</td>", page, re.S)
    assert len(cells) == 3
    ana = next(c for c in cells if "Ana Ruiz" in c)
    assert "ana@example.com" in ana and "Verified" in ana and "Not verified" not in ana
    ola = next(c for c in cells if "ola@example.no" in c)
    assert "Not verified" in ola


def test_filters_offer_modes_and_tools_in_plain_translated_words(agent, client_a, data_a, settings):
    ReasoningTrace.objects.for_client(client_a).filter(
        conversation=data_a.quiet_conversation
    ).update(mode="as_needed")
    page = agent.get(INBOX).content.decode()
    assert '<option value="adaptive">Adaptive</option>' in page
    assert '<option value="as_needed">Deliberate when needed</option>' in page
    assert '<option value="lookup_order">Lookup order</option>' in page
    assert ">adaptive<" not in page and "As_needed" not in page and ">as_needed<" not in page
    agent.cookies[settings.LANGUAGE_COOKIE_NAME] = "es"
    spanish = agent.get(INBOX).content.decode()
    assert '<option value="adaptive">Adaptativo</option>' in spanish
    assert '<option value="as_needed">Deliberar cuando haga falta</option>' in spanish


def test_the_hand_back_form_answers_unless_its_box_is_cleared(
    agent, client_a, data_a, django_capture_on_commit_callbacks
):
    """The page's one hand-back form posts a hidden "0" and, while its box is ticked (the
    default), a "1" after it: ticked answers the waiting message, cleared does not."""
    conv = data_a.conversation
    page = agent.get(reverse("console-conversation", args=[conv.public_id])).content.decode()
    form = re.search(r'<form[^>]*class="gd-handback".*?</form>', page, re.S)
    assert form, page
    assert re.findall(r'name="answer_waiting" value="(\d)"', form.group(0)) == ["0", "1"]
    assert re.search(r'type="checkbox" name="answer_waiting" value="1" checked', form.group(0))
    waiting = _waiting(client_a, conv)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        agent.post(action(conv, "handback"), {"answer_waiting": ["0", "1"]})  # ticked
    assert queued
    assert not ReasoningTrace.objects.for_client(client_a).filter(user_message=waiting).exists()

    other, _ = make_conversation_with_turn(client_a, "Help")
    escalation_create(client=client_a, conversation=other, reason="policy", notify=False)
    waiting_too = _waiting(client_a, other)
    with django_capture_on_commit_callbacks(execute=False):
        agent.post(action(other, "handback"), {"answer_waiting": ["0"]})  # cleared
    assert ReasoningTrace.objects.for_client(client_a).get(user_message=waiting_too).status == (
        TraceStatus.SKIPPED
    )
