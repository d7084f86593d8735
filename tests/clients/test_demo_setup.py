"""`manage.py demo_setup` (what `make demo` runs): one readable block with the addresses of the
host and port actually served, the demo sign-in, and the widget and API keys — which work."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import User
from apps.clients.models import Client
from apps.provisioning.management.commands.demo_setup import DEMO_EMAIL, DEMO_PASSWORD, base_url
from tests.conftest import DEMO_TENANT

pytestmark = pytest.mark.django_db


def demo_setup(*args: str) -> str:
    out = StringIO()
    call_command("demo_setup", *args, stdout=out)
    return out.getvalue()


def field(output: str, name: str) -> str:
    match = re.search(rf"^  {re.escape(name)}:\s+(\S+)", output, re.MULTILINE)
    assert match, f"{name!r} not in:\n{output}"
    return match.group(1)


def test_the_block_names_the_port_served_and_keys_that_work(client, settings):
    settings.OPENAI_API_KEY = ""
    output = demo_setup("--tenant", str(DEMO_TENANT), "--host", "127.0.0.1", "--port", "27011")

    assert "8000" not in output
    assert "{" not in output  # no raw JSON
    assert field(output, "Demo shop") == "http://127.0.0.1:27011/"
    assert field(output, "Admin") == "http://127.0.0.1:27011/admin/"
    assert field(output, "Console") == "http://127.0.0.1:27011/console/"
    assert field(output, "API docs") == "http://127.0.0.1:27011/api/docs/"
    assert f"Sign in:     {DEMO_EMAIL} / {DEMO_PASSWORD}" in output
    trailhead = Client.objects.get(slug="trailhead")
    assert field(output, "Widget key") == trailhead.widget_key
    # an unverified visitor is sent to sign in on the shop actually served
    assert trailhead.signin_url == "http://127.0.0.1:27011/"
    api_key = field(output, "API key")
    assert "shown only now" in output
    assert "OFFLINE DEMO MODEL" in output

    # the printed key and sign-in are the real ones
    response = client.get("/api/v1/conversations/", HTTP_AUTHORIZATION=f"Api-Key {api_key}")
    assert response.status_code == 200
    assert User.objects.get(email=DEMO_EMAIL).check_password(DEMO_PASSWORD)


def test_a_second_run_says_the_api_key_was_issued_before():
    demo_setup("--tenant", str(DEMO_TENANT), "--port", "8011")
    again = demo_setup("--tenant", str(DEMO_TENANT), "--port", "8011")
    assert field(again, "Admin") == "http://127.0.0.1:8011/admin/"
    assert "issued earlier" in field(again, "API key") + again
    assert not re.search(r"API key:\s+gd", again)
    assert User.objects.filter(email=DEMO_EMAIL).count() == 1


def test_a_wildcard_or_ipv6_host_prints_an_address_a_browser_opens():
    assert base_url("0.0.0.0", 8011) == "http://127.0.0.1:8011/"
    assert base_url("::1", 8011) == "http://[::1]:8011/"
    assert base_url("localhost", 9000) == "http://localhost:9000/"


def test_a_broken_tenant_file_fails_clearly_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(CommandError, match="not valid JSON"):
        demo_setup("--tenant", str(bad))
    assert not User.objects.exists()
