"""The sign-in pages follow the account adapter: sign-up is offered exactly when
`is_open_for_signup` allows it (closed for GuideDesk staff), never hard-coded."""

from __future__ import annotations

import pytest

from apps.accounts.adapters import StaffAccountAdapter

pytestmark = pytest.mark.django_db


def test_sign_up_is_not_offered_while_it_is_closed(client):
    page = client.get("/accounts/login/").content.decode()
    assert "GuideDesk" in page and "Staff sign-in" in page
    assert "sign up" not in page.lower() and "/accounts/signup/" not in page
    assert "/static/console/console.css" in page
    # the sign-up URL itself says it is closed, in the same look
    closed = client.get("/accounts/signup/").content.decode()
    assert "/static/console/console.css" in closed


def test_sign_up_is_offered_when_the_adapter_opens_it(client, monkeypatch):
    monkeypatch.setattr(StaffAccountAdapter, "is_open_for_signup", lambda self, request: True)
    page = client.get("/accounts/login/").content.decode()
    assert 'href="/accounts/signup/' in page
    assert "Sign up" in page
