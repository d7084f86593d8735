"""Read side of the e-mail one-time code."""

from __future__ import annotations

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.identity.models import ChallengeStatus, EmailCodeChallenge, EmailCodeSetting


def email_code_setting(*, client: Client) -> EmailCodeSetting | None:
    """The client's e-mail code setting, or None when it has none."""
    return EmailCodeSetting.objects.for_client(client).first()


def email_code_enabled(*, client: Client) -> bool:
    """Whether this client can verify a customer by e-mail code (for the guard's refusal: offer
    a code, or ask the customer to sign in)."""
    return EmailCodeSetting.objects.for_client(client).filter(enabled=True).exists()


def challenge_open(*, client: Client, conversation: Conversation) -> EmailCodeChallenge | None:
    """The conversation's code that is waiting to be typed (the newest; older ones are
    replaced when a new one is sent). An expired one still counts: typing it says so."""
    if conversation.client_id != client.pk:
        return None
    return (
        EmailCodeChallenge.objects.for_client(client)
        .filter(conversation=conversation, status=ChallengeStatus.OPEN)
        .order_by("-created_at", "-pk")
        .first()
    )
