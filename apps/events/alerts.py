"""The chat alert (Slack, Microsoft Teams): an incoming webhook takes `{"text": "…"}`, the one
shape both accept. Sent for what needs a person — a hand-off, an approval waiting — in the
client's language, with a link to the conversation in the console."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext, gettext_noop

from apps.clients.models import Client
from apps.core.links import absolute_url
from apps.escalations.models import EscalationReason
from apps.events.models import EventType

HANDOFF_ALERT = gettext_noop(
    "%(business)s: a conversation was handed to your team (%(reason)s). %(link)s"
)
APPROVAL_ALERT = gettext_noop(
    "%(business)s: %(tool)s is waiting for a teammate's approval. %(link)s"
)


def conversation_link(*, client: Client, conversation: str) -> str:
    """The conversation's console page, the client selected."""
    if not conversation:
        return ""
    path = reverse("console-conversation", args=[conversation])
    return absolute_url(path + "?" + urlencode({"client": client.slug}))


def alert_text(*, client: Client, event: dict[str, Any]) -> str:
    """The alert for `event` in the client's language."""
    data = event.get("data") or {}
    link = conversation_link(client=client, conversation=event.get("conversation") or "")
    with translation.override(client.language or "en"):
        if event["type"] == EventType.CONVERSATION_HANDED_OFF:
            reason = data.get("reason", "")
            label = (
                str(EscalationReason(reason).label) if reason in EscalationReason.values else reason
            )
            text = gettext(HANDOFF_ALERT) % {
                "business": client.name,
                "reason": label,
                "link": link,
            }
        else:
            text = gettext(APPROVAL_ALERT) % {
                "business": client.name,
                "tool": data.get("tool", ""),
                "link": link,
            }
    return text.strip()
