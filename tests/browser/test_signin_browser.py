"""The staff sign-in pages (django-allauth) in a real headless Chromium: /admin/ leads to a page
in the product's look (the console's stylesheet, "GuideDesk", "Staff sign-in") that offers no
sign-up while sign-up is closed; signing in, the two-factor step, the password reset and its
follow-ups, and signing out all keep that look."""

from __future__ import annotations

import re
from typing import Any

import pytest
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret
from django.core import mail
from playwright.sync_api import expect

from tests.accounts.test_mfa_required import PASSWORD, current_code
from tests.browser.conftest import SCREENSHOTS
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CONSOLE_GREEN = "rgb(31, 58, 47)"  # .gd-console-header in static/console/console.css


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context()
    page = context.new_page()
    page.errors = []
    page.not_found = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on(
        "response",
        lambda response: response.status == 404 and page.not_found.append(response.url),
    )
    yield page
    context.close()


def assert_product_look(page: Any) -> None:
    """The console's stylesheet is loaded and applied, the product is named, nothing offers
    a sign-up."""
    sheets = page.evaluate("[...document.styleSheets].map(s => s.href || '')")
    assert any(href.endswith("/static/console/console.css") for href in sheets), sheets
    header = page.locator("header.gd-console-header")
    expect(header).to_be_visible()
    assert header.evaluate("h => getComputedStyle(h).backgroundColor") == CONSOLE_GREEN
    expect(header.get_by_role("link", name="GuideDesk")).to_be_visible()
    text = page.locator("body").inner_text()
    assert not re.search(r"sign[\s-]?up", text, re.IGNORECASE), text
    assert page.locator("a[href*='signup']").count() == 0
    assert page.title().endswith("GuideDesk staff sign-in")


def test_admin_leads_to_a_styled_sign_in_without_sign_up_and_signing_in_works(
    page, live_server, screenshots
):
    user = UserFactory(is_superuser=True)
    page.goto(f"{live_server.url}/admin/")
    assert "/accounts/login/" in page.url
    assert_product_look(page)
    expect(page.get_by_role("heading", name="Staff sign-in")).to_be_visible()
    expect(page.get_by_text("Staff sign-in").first).to_be_visible()
    expect(page.get_by_text("Accounts are created by your administrator")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "sign-in.png"), full_page=True)

    page.get_by_label("Email").fill(user.email)
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".errorlist")).to_be_visible()  # a clear error, same look
    assert_product_look(page)

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/admin/")
    expect(page.locator("#site-name")).to_have_text("GuideDesk")

    # signing out: allauth's confirmation page, in the same look
    page.goto(f"{live_server.url}/accounts/logout/")
    assert_product_look(page)
    page.get_by_role("button", name="Sign out").click()
    page.goto(f"{live_server.url}/admin/")
    assert "/accounts/login/" in page.url
    assert page.errors == []
    assert page.not_found == []  # the favicon included


def test_the_two_factor_step_is_styled_and_signs_in(page, live_server, screenshots):
    user = UserFactory(is_superuser=True)
    secret = generate_totp_secret()
    TOTP.activate(user, secret)
    page.goto(f"{live_server.url}/admin/")
    page.get_by_label("Email").fill(user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/accounts/2fa/authenticate/"))
    assert_product_look(page)
    expect(page.get_by_role("heading", name="Two-Factor Authentication")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "sign-in-mfa.png"), full_page=True)
    page.get_by_label("Code").fill(current_code(secret))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/admin/")
    expect(page.locator("#site-name")).to_have_text("GuideDesk")
    assert page.errors == []


def test_the_password_reset_and_its_follow_ups_are_styled(page, live_server):
    user = UserFactory()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    assert_product_look(page)
    page.get_by_label("Email").fill(user.email)
    page.get_by_role("button", name="Reset My Password").click()
    page.wait_for_url(re.compile(r"/accounts/password/reset/done/"))
    assert_product_look(page)

    [message] = mail.outbox
    link = re.search(r"http://\S+/accounts/password/reset/key/\S+", message.body).group(0)
    page.goto(link)
    page.wait_for_url(re.compile(r"/accounts/password/reset/key/"))
    assert_product_look(page)
    page.locator("#id_password1").fill("a-brand-new-pass-42")
    page.locator("#id_password2").fill("a-brand-new-pass-42")
    page.get_by_role("button", name="Change Password").click()
    page.wait_for_url(re.compile(r"/accounts/password/reset/key/done/"))
    assert_product_look(page)
    user.refresh_from_db()
    assert user.check_password("a-brand-new-pass-42")
    assert page.errors == []
