"""The staff console: the escalation queue, one conversation, replying and resolving — signed-in
staff only, scoped to their membership, viewers read-only, CSRF-protected."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.conversations.services import message_append
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_create, escalation_resolve, staff_reply
from tests.api.conftest import add_turn, escalate_turns, make_conversation_with_turn
from tests.factories import ClientFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

# The escalation queue: the inbox (the console's root) filtered to hand-offs, on its own page.
QUEUE = reverse("console-escalations")


def page_url(conversation: Conversation, suffix: str = "") -> str:
    return reverse("console-conversation", args=[conversation.public_id]) + suffix


def html(response) -> str:
    return response.content.decode()


def snapshot() -> tuple:
    return (
        list(
            Message.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "text")
        ),
        list(
            Escalation.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "status", "assigned_to")
        ),
        list(
            Conversation.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "status")
        ),
    )


# --------------------------------------------------------------------------- who gets in


@pytest.mark.parametrize(
    "url_name", ["console-queue", "console-conversation", "console-conversation-reply"]
)
def test_anonymous_visitors_are_sent_to_sign_in(client, data_a, url_name):
    args = [data_a.conversation.public_id] if url_name != "console-queue" else []
    url = reverse(url_name, args=args)
    response = client.get(url) if url_name != "console-conversation-reply" else client.post(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_login"))


def test_polling_while_signed_out_is_a_json_401(client, data_a):
    for url in (reverse("console-queue-poll"), page_url(data_a.conversation, "poll")):
        response = client.get(url)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "not_authenticated"


def test_staff_without_a_membership_get_no_access(client, data_a):
    client.force_login(UserFactory())
    response = client.get(QUEUE)
    assert response.status_code == 403
    assert "not a member of any client" in html(response)
    assert client.get(page_url(data_a.conversation)).status_code == 403


def test_a_member_of_several_clients_picks_one(client, data_a, data_b):
    user = UserFactory()
    MembershipFactory(client=data_a.client, user=user, role=Role.AGENT)
    MembershipFactory(client=data_b.client, user=user, role=Role.VIEWER)
    client.force_login(user)

    picker = client.get(QUEUE)
    assert picker.status_code == 200
    assert "Choose a client" in html(picker)
    assert f"?client={data_a.client.slug}" in html(picker)
    assert f"?client={data_b.client.slug}" in html(picker)

    acme = client.get(QUEUE, {"client": data_a.client.slug})
    assert str(data_a.conversation.public_id)[:8] in html(acme)
    assert str(data_b.conversation.public_id)[:8] not in html(acme)
    # links keep the chosen client
    assert f"?client={data_a.client.slug}" in html(acme)

    globex_page = client.get(page_url(data_b.conversation), {"client": data_b.client.slug})
    assert globex_page.status_code == 200
    assert "Send reply" not in html(globex_page)  # viewer there
    assert client.get(QUEUE, {"client": "initech"}).status_code == 404
    assert client.get(QUEUE, {"client": "acme\x00"}).status_code == 404  # not a 500 on PostgreSQL


def test_a_superuser_picks_any_client(client, data_a):
    ClientFactory(name="Globex")  # a second active client: there is a choice to make
    client.force_login(UserFactory(is_superuser=True))
    assert "Choose a client" in html(client.get(QUEUE))
    response = client.get(page_url(data_a.conversation), {"client": data_a.client.slug})
    assert response.status_code == 200
    assert "Send reply" in html(response)


# ------------------------------------------------------------------------------- the queue


def test_the_queue_lists_open_escalations_first_with_what_an_agent_needs(
    viewer, client_a, data_a, data_b
):
    older, _ = make_conversation_with_turn(client_a, text="My parcel never arrived!")
    older_escalation = escalation_create(
        client=client_a, conversation=older, reason="low_confidence", notify=False
    )
    Escalation.objects.unscoped("test checks the database directly").filter(
        pk=older_escalation.pk
    ).update(created_at=timezone.now() - timedelta(hours=3))
    agent_user = MembershipFactory(client=client_a, role=Role.AGENT).user
    staff_reply(client=client_a, conversation=older, text="Looking into it.", author=agent_user)
    done, _ = make_conversation_with_turn(client_a, text="Thanks, all sorted")
    resolved = escalation_create(client=client_a, conversation=done, reason="policy", notify=False)
    escalation_resolve(client=client_a, escalation=resolved)

    response = viewer.get(QUEUE)
    assert response.status_code == 200
    page = html(response)
    open_section, resolved_section = page.split("Recently resolved")
    # open ones, longest waiting first
    assert open_section.index(str(older.public_id)[:8]) < open_section.index(
        str(data_a.conversation.public_id)[:8]
    )
    assert "Assistant not confident" in open_section
    assert "3\xa0hours" in open_section  # age
    assert "My parcel never arrived!" in open_section  # the customer's last message
    assert agent_user.email in open_section  # assignee
    assert "Unassigned" in open_section
    assert str(done.public_id)[:8] in resolved_section
    assert str(done.public_id)[:8] not in open_section
    assert str(data_b.conversation.public_id)[:8] not in page  # another tenant's


def test_the_queue_titles_each_row_by_its_subject_not_its_id(viewer, client_a, data_a):
    """A row reads as the customer's first words, linked to the conversation; no `6a08b19a…`
    id is shown (it stays in the link's address only)."""
    message_append(
        client=client_a, conversation=data_a.conversation, role="user", text="Anyone there?"
    )
    (row,) = viewer.get(reverse("console-queue-poll")).json()["open"]
    assert row["title"] == "Where is my order?"  # the first message, not the latest
    page = html(viewer.get(QUEUE))
    link = re.search(rf'<a href="{page_url(data_a.conversation)}[^"]*">(.*?)</a>', page)
    assert link and link.group(1) == "Where is my order?"
    short_id = str(data_a.conversation.public_id)[:8]
    assert f"<code>{short_id}" not in page and f">{short_id}" not in page


def test_the_queue_poll_returns_the_same_rows_as_json(viewer, client_a, data_a, data_b):
    response = viewer.get(reverse("console-queue-poll"))
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    body = response.json()
    (row,) = body["open"]
    assert row["id"] == str(data_a.escalation.public_id)
    assert row["conversation"] == str(data_a.conversation.public_id)
    assert row["url"] == page_url(data_a.conversation) + f"?client={client_a.slug}"
    assert row["reason"] == "Customer asked for a human"
    assert row["last_customer_text"] == "Where is my order?"
    assert row["assigned_to"] is None
    assert body["recently_resolved"] == []


def test_the_queue_takes_a_flat_number_of_queries(viewer, client_a, django_assert_max_num_queries):
    escalate_turns(client_a, 2)
    with django_assert_max_num_queries(12) as few:
        viewer.get(QUEUE)
    escalate_turns(client_a, 20)
    with django_assert_max_num_queries(12) as many:
        viewer.get(QUEUE)
    assert len(many.captured_queries) == len(few.captured_queries)


# --------------------------------------------------------------------------- a conversation


def test_the_page_shows_everything_with_internal_reasoning_collapsed(agent, data_a):
    response = agent.get(page_url(data_a.conversation))
    assert response.status_code == 200
    page = html(response)
    assert "Where is my order?" in page
    assert "Let me check that for you." in page
    # the internal assessment is there, inside a closed <details>
    internal = re.search(
        r'<li class="gd-msg gd-internal" data-seq="2">\s*<details>(.*?)</details>', page, re.S
    )
    assert internal, "internal messages are rendered collapsed"
    assert "Confidence 5/10" in internal.group(1)
    assert "&quot;confidence&quot;: 5" in internal.group(1)
    assert "<details open" not in page
    # the turn and its steps
    assert "Reasoning turns (1)" in page
    assert "1. assess" in page
    # actions for an agent
    assert "Send reply" in page
    # one hand-back control, not three that read alike
    assert page.count('data-action="handback"') == 1
    assert page.count("Hand back to the assistant") == 1
    assert "Resolve — hand back" not in page and "handback-quiet" not in page
    assert 'name="csrfmiddlewaretoken"' in page
    # live updates
    assert 'src="/static/console/console.js"' in page
    assert f'data-poll-url="{page_url(data_a.conversation, "poll")}' in page


def test_a_viewer_reads_but_sees_no_actions(viewer, data_a):
    page = html(viewer.get(page_url(data_a.conversation)))
    assert "Where is my order?" in page
    assert "Send reply" not in page
    assert 'data-action="handback"' not in page
    assert "viewer" in page


@pytest.mark.parametrize("action", ["reply", "resolve"])
def test_a_viewer_cannot_act_even_by_posting_directly(viewer, data_a, action):
    before = snapshot()
    response = viewer.post(page_url(data_a.conversation, action), {"text": "sneaky"})
    assert response.status_code == 403
    assert snapshot() == before


def test_an_agent_replies(agent, data_a):
    response = agent.post(page_url(data_a.conversation, "reply"), {"text": "  I'm on it.  "})
    assert response.status_code == 302
    assert response["Location"].endswith("#reply")
    message = Message.objects.filter(conversation=data_a.conversation).order_by("-seq").first()
    assert (message.role, message.visibility, message.text) == ("staff", "visible", "I'm on it.")
    assert message.author == agent.staff_user
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.assigned_to == agent.staff_user
    followed = agent.get(response["Location"])
    assert "Reply sent." in html(followed)
    # A staff reply is shown as the customer sees it: its Markdown rendered (plain text here).
    assert '<div class="gd-msg-text gd-rich" dir="auto"><p>I\'m on it.</p></div>' in html(followed)


def test_replying_to_a_conversation_the_assistant_owns_takes_it_over(agent, data_a):
    response = agent.post(page_url(data_a.quiet_conversation, "reply"), {"text": "Hi!"})
    assert response.status_code == 302
    data_a.quiet_conversation.refresh_from_db()
    assert data_a.quiet_conversation.status == "escalated"
    assert Escalation.objects.get(conversation=data_a.quiet_conversation).reason == (
        "staff_takeover"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "This field is required."), ("   ", "This field is required."), ("x" * 4001, "4000")],
)
def test_a_bad_reply_is_shown_back_and_changes_nothing(agent, data_a, text, error):
    before = snapshot()
    response = agent.post(page_url(data_a.conversation, "reply"), {"text": text})
    assert response.status_code == 400
    assert error in html(response)
    assert 'class="gd-errors"' in html(response)
    assert snapshot() == before


def test_an_agent_resolves_and_resolving_again_changes_nothing(agent, data_a):
    response = agent.post(page_url(data_a.conversation, "resolve"))
    assert response.status_code == 302
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.status == "resolved"
    assert data_a.escalation.resolved_by == agent.staff_user
    data_a.conversation.refresh_from_db()
    assert data_a.conversation.status == "open"
    assert "the assistant answers this conversation again" in html(agent.get(response["Location"]))

    before = snapshot()
    again = agent.post(page_url(data_a.conversation, "resolve"))
    assert again.status_code == 302
    assert snapshot() == before
    assert "Nothing to resolve" in html(agent.get(again["Location"]))


def test_forms_are_csrf_protected(browser_for, data_a):
    browser = browser_for(Role.AGENT, csrf=True)
    before = snapshot()
    for action in ("reply", "resolve"):
        response = browser.post(page_url(data_a.conversation, action), {"text": "no token"})
        assert response.status_code == 403
    assert snapshot() == before

    page = html(browser.get(page_url(data_a.conversation)))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = browser.post(
        page_url(data_a.conversation, "reply"), {"text": "with token", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(text="with token")
        .exists()
    )


def test_the_page_takes_a_flat_number_of_queries(
    agent, client_a, data_a, django_assert_max_num_queries
):
    agent.get(page_url(data_a.conversation))
    with django_assert_max_num_queries(15) as small:
        agent.get(page_url(data_a.conversation))
    for n in range(10):
        add_turn(client_a, data_a.conversation, text=f"more {n}")
    with django_assert_max_num_queries(15) as big:
        response = agent.get(page_url(data_a.conversation))
    assert "Reasoning turns (11)" in html(response)
    assert len(big.captured_queries) == len(small.captured_queries)


# ------------------------------------------------------------------------------- polling


def test_poll_returns_new_messages_and_the_current_state(agent, client_a, data_a):
    url = page_url(data_a.conversation, "poll")
    everything = agent.get(url).json()
    assert [m["seq"] for m in everything["messages"]] == [1, 2, 3, 4, 5]
    last = everything["last_seq"]
    assert last == 5
    assert everything["status"] == "escalated"
    assert everything["open_escalation"]["reason"] == "Customer asked for a human"

    message_append(client=client_a, conversation=data_a.conversation, role="user", text="Hello?")
    update = agent.get(url, {"after": last}).json()
    (new,) = update["messages"]
    assert (new["seq"], new["text"], new["role_label"]) == (6, "Hello?", "Customer")
    assert agent.get(url, {"after": 6}).json()["messages"] == []

    escalation_resolve(client=client_a, escalation=data_a.escalation)
    state = agent.get(url, {"after": 6}).json()
    assert state["status"] == "open"
    assert state["open_escalation"] is None
    assert [m["kind"] for m in state["messages"]] == ["notice"]


def test_poll_includes_internal_messages_with_their_data(viewer, data_a):
    messages = viewer.get(page_url(data_a.conversation, "poll")).json()["messages"]
    internal = [m for m in messages if m["visibility"] == "internal"]
    assert internal[0]["kind"] == "assessment"
    assert internal[0]["kind_label"] == "Assessment"
    assert '"confidence": 5' in internal[0]["data_json"]


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "9" * 20])
def test_poll_rejects_a_bad_after(viewer, data_a, after):
    response = viewer.get(page_url(data_a.conversation, "poll"), {"after": after})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


# -------------------------------------------------------------------------- other tenants


def test_another_tenants_conversation_is_not_found(browser_for, data_a, data_b):
    b_agent = browser_for(Role.OWNER, client=data_b.client)
    before = snapshot()
    assert b_agent.get(page_url(data_a.conversation)).status_code == 404
    assert b_agent.get(page_url(data_a.conversation, "poll")).status_code == 404
    assert b_agent.post(page_url(data_a.conversation, "reply"), {"text": "hi"}).status_code == 404
    assert b_agent.post(page_url(data_a.conversation, "resolve")).status_code == 404
    assert snapshot() == before
    # ?client= cannot reach a client one is not a member of
    assert b_agent.get(page_url(data_a.conversation), {"client": "acme"}).status_code == 404
    assert b_agent.get(page_url(data_b.conversation)).status_code == 200


def test_malformed_ids_are_not_found(agent):
    assert agent.get(reverse("console-conversation", args=["not-a-uuid"])).status_code == 404


# -------------------------------------------------------------------------------- assets


def test_console_assets_are_local_and_plain():
    script = Path(finders.find("console/console.js")).read_text()
    common = Path(finders.find("console/common.js")).read_text()  # the helpers it uses
    style = Path(finders.find("console/console.css")).read_text()
    assert "fetch(" in script
    for code in (script, common):
        assert ".innerHTML" not in code  # server text is inserted as text only
    for asset in (script, common, style):
        assert not re.search(r"https?://", asset), "no CDN"
    templates = Path(settings.BASE_DIR, "templates", "console")
    for template in templates.glob("*.html"):
        assert not re.search(r"(src|href)=\"https?://", template.read_text()), template


def test_a_client_with_no_escalations_has_an_empty_queue(browser_for):
    quiet = ClientFactory(slug="quiet")
    browser = browser_for(Role.VIEWER, client=quiet)
    page = html(browser.get(QUEUE))
    assert "Nothing waiting" in page
    assert browser.get(reverse("console-queue-poll")).json() == {
        "open": [],
        "recently_resolved": [],
    }


def test_with_exactly_one_client_the_console_opens_its_queue(client, data_a):
    """Nothing to choose (the demo's superuser, most agents): no "You work for several
    clients" page; the queue of that one client, kept selected in every link."""
    Client.objects.exclude(pk=data_a.client.pk).update(is_active=False)
    client.force_login(UserFactory(is_superuser=True))
    page = html(client.get(QUEUE))
    assert "several clients" not in page and "Choose a client" not in page
    assert data_a.client.name in page
    assert f"?client={data_a.client.slug}" in page
    poll = client.get(reverse("console-queue-poll"))
    assert poll.status_code == 200
    # a second active client brings the choice back
    ClientFactory(name="Second Shop")
    assert "Choose a client" in html(client.get(QUEUE))


def test_the_page_shows_the_address_the_customer_left(agent, data_a):
    page = html(agent.get(page_url(data_a.conversation)))
    assert re.search(r"Customer's e-mail</dt><dd data-contact-email>—</dd>", page)
    Conversation.objects.unscoped("test checks the database directly").filter(
        pk=data_a.conversation.pk
    ).update(contact_email="ann@example.com")
    page = html(agent.get(page_url(data_a.conversation)))
    assert '<a href="mailto:ann@example.com">ann@example.com</a>' in page
