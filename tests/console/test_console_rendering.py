"""The console's conversation page shows replies as the customer sees them: the assistant's and
staff Markdown rendered by the one renderer (apps/conversations/rendering.py), a knowledge
answer's sources under it with a translated label, the customer's own words as text — on the
page as served and in the poll endpoint the page's script draws new messages from."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.urls import reverse

from apps.accounts.models import Role
from apps.conversations.services import message_append

pytestmark = pytest.mark.django_db

REPLY = (
    "**Free** returns:\n\n- print the label\n\n"
    "[returns](https://acme.example/r) <script>x()</script>"
)
SOURCES = [
    {"title": "Returns policy", "url": "https://acme.example/returns"},
    {"title": "Return FAQ", "url": "javascript:alert(1)"},
]


def add_messages(data) -> None:
    for role, text, extra in (
        ("user", "**mine** <img src=x onerror=alert(1)>", {}),
        ("assistant", REPLY, {"sources": SOURCES}),
        ("staff", "I'll *check*.", {}),
    ):
        message_append(
            client=data.client, conversation=data.conversation, role=role, text=text, data=extra
        )


def test_the_page_renders_replies_and_their_sources(browser_for, data_a):
    add_messages(data_a)
    agent = browser_for(Role.AGENT)
    page = agent.get(reverse("console-conversation", args=[data_a.conversation.public_id]))
    body = page.content.decode()

    assert "<p><strong>Free</strong> returns:</p>" in body
    assert "<ul>\n<li>print the label</li>\n</ul>" in body
    assert (
        '<a href="https://acme.example/r" target="_blank" rel="noopener noreferrer nofollow">'
        "returns</a> &lt;script&gt;x()&lt;/script&gt;"
    ) in body
    assert "<p>I'll <em>check</em>.</p>" in body
    # the customer's words are text: no Markdown, no HTML
    assert "**mine** &lt;img src=x onerror=alert(1)&gt;" in body
    assert "<img src=x" not in body and "<script>x()" not in body
    # the sources: a linked title, and a title alone where the address is no web page
    assert (
        '<a href="https://acme.example/returns" target="_blank" rel="noopener noreferrer" '
        'dir="auto">Returns policy</a>'
    ) in body
    assert '<span dir="auto">Return FAQ</span>' in body and "javascript:alert" not in body
    assert '<span class="gd-sources-label">Sources</span>' in body


def test_the_sources_label_is_translated(browser_for, data_a):
    add_messages(data_a)
    agent = browser_for(Role.AGENT)
    agent.cookies[settings.LANGUAGE_COOKIE_NAME] = "es"
    page = agent.get(reverse("console-conversation", args=[data_a.conversation.public_id]))
    body = page.content.decode()
    assert '<span class="gd-sources-label">Fuentes</span>' in body
    assert 'data-sources-label="Fuentes"' in body  # for replies the page's script adds


def test_the_poll_endpoint_carries_the_rendered_reply(browser_for, data_a):
    before = data_a.conversation.last_seq
    add_messages(data_a)
    agent = browser_for(Role.AGENT)
    url = reverse("console-conversation-poll", args=[data_a.conversation.public_id])
    payload = agent.get(url, {"after": before}).json()
    by_role = {m["role"]: m for m in payload["messages"]}
    assert by_role["assistant"]["html"].startswith("<p><strong>Free</strong> returns:</p>")
    assert "&lt;script&gt;" in by_role["assistant"]["html"]
    assert by_role["assistant"]["sources"] == [
        {"title": "Returns policy", "url": "https://acme.example/returns"},
        {"title": "Return FAQ", "url": ""},
    ]
    assert by_role["staff"]["html"] == "<p>I'll <em>check</em>.</p>"
    assert by_role["user"]["html"] == "" and by_role["user"]["sources"] == []


def test_another_tenants_conversation_stays_a_404(browser_for, data_a, client_b):
    add_messages(data_a)
    outsider = browser_for(Role.AGENT, client=client_b)
    page = outsider.get(reverse("console-conversation", args=[data_a.conversation.public_id]))
    poll = outsider.get(
        reverse("console-conversation-poll", args=[data_a.conversation.public_id]), {"after": 0}
    )
    assert page.status_code == 404 and poll.status_code == 404
    assert "Returns policy" not in page.content.decode() + poll.content.decode()
