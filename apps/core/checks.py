"""Deployment checks of our own (`manage.py check --deploy`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

# Backends that never deliver: the message ends up in the log, a file, memory or nowhere.
UNDELIVERED_EMAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend": "writes every e-mail to the server log",
    "django.core.mail.backends.filebased.EmailBackend": "writes every e-mail to a file",
    "django.core.mail.backends.locmem.EmailBackend": "keeps every e-mail in memory",
    "django.core.mail.backends.dummy.EmailBackend": "drops every e-mail",
}


@register(Tags.security, deploy=True)
def check_email_is_delivered(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Hand-off e-mails carry the customer's words and password-reset e-mails a sign-in link:
    in production they must go to a mail server, never to the log."""
    backend = settings.EMAIL_BACKEND
    what = UNDELIVERED_EMAIL_BACKENDS.get(backend)
    if what is None:
        return []
    return [
        Error(
            f"EMAIL_BACKEND is {backend}, which {what}.",
            hint=(
                "Set EMAIL_URL to your mail server, e.g. smtp+tls://user:password@smtp.example:587 "
                "(production settings require it)."
            ),
            id="guidedesk.E001",
        )
    ]
