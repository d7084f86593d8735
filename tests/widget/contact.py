"""Leave an address in the widget and confirm it with the e-mailed link, as a customer does."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.core import mail
from django.test import Client as DjangoClient
from django.test import TestCase

from tests.widget.conftest import API, Widget

LINK = re.compile(r"https?://\S+/widget/confirm-email/\S+/")


def contact(widget: Widget, conversation_id: str, token: str | None, body: Any, **headers: str):
    return widget.http.post(
        f"{API}conversations/{conversation_id}/contact",
        body,
        format="json",
        headers=widget.headers(token, **headers),
    )


def confirmation_links(address: str) -> list[str]:
    """The confirmation links e-mailed to `address`, oldest first."""
    return [
        match.group(0)
        for message in mail.outbox
        if address in message.to
        for match in [LINK.search(message.body)]
        if match
    ]


FORM = re.compile(
    r'<form method="post" action="(?P<action>[^"]+)"[^>]*>\s*'
    r'<input type="hidden" name="token" value="(?P<token>[^"]+)">'
)


def confirm_form(page: Any) -> tuple[str, str] | None:
    """The action and hidden token of the confirmation page's form (None: no form)."""
    match = FORM.search(page.content.decode())
    return (match.group("action"), match.group("token")) if match else None


def open_link(link: str, **headers: str) -> Any:
    """Open the link as the customer does: the page (a GET, which confirms nothing), then its
    button when it shows one (the form's POST). Returns the last page."""
    http = DjangoClient()
    page = http.get(urlsplit(link).path, headers=headers)
    form = confirm_form(page)
    if form is None:
        return page
    action, token = form
    return http.post(action, {"token": token}, headers=headers)


def leave_confirmed_address(widget: Widget, conversation_id: str, token: str, address: str):
    """Save the address (its confirmation e-mail goes out on commit), click the link, and
    leave an empty outbox for the test's own e-mails."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = contact(widget, conversation_id, token, {"email": address})
    assert response.status_code == 200, response.content
    (link,) = confirmation_links(address)[-1:]
    assert open_link(link).status_code == 200
    mail.outbox.clear()
    return response
