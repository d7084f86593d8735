"""Raw SQL runs only as a reviewed site (apps/core/tenant_sql.py), bound to its client."""

from __future__ import annotations

import pytest

from apps.conversations.models import Message
from apps.core import tenant_sql
from apps.core.tenancy import TenantScopeError, tenant_scope
from apps.core.tenant_sql import CLIENT_SQL, PLATFORM_SQL, sql_models, sql_rows
from apps.widget.selectors import widget_client_by_key, widget_message_events_after
from tests.api.conftest import make_conversation_with_turn

pytestmark = pytest.mark.django_db

MESSAGES = f"SELECT id FROM {Message._meta.db_table} WHERE client_id = %s"  # noqa: S608


@pytest.fixture
def reviewed(monkeypatch):
    """A fake client site and a fake platform site, as a new statement would add them."""
    monkeypatch.setitem(CLIENT_SQL, "test.messages", "SELECT one client's message ids")
    monkeypatch.setitem(PLATFORM_SQL, "test.one", "SELECT 1")


def test_the_lists_do_not_overlap():
    assert not set(CLIENT_SQL) & set(PLATFORM_SQL)
    assert all(text.strip() for text in {**CLIENT_SQL, **PLATFORM_SQL}.values())


def test_a_site_that_is_not_reviewed_raises(reviewed, client_a):
    with pytest.raises(TenantScopeError, match="not reviewed"):
        sql_rows("test.unknown", "SELECT 1", client_id=None)
    with pytest.raises(TenantScopeError, match="not reviewed"):
        sql_models("test.unknown", Message, MESSAGES, [client_a.pk], client_id=client_a.pk)


def test_a_client_site_is_bound_to_its_client(reviewed, client_a, client_b):
    make_conversation_with_turn(client_a)
    make_conversation_with_turn(client_b)
    mine = sorted(Message.objects.for_client(client_a).values_list("pk", flat=True))
    rows = sql_rows("test.messages", MESSAGES, [client_a.pk], client_id=client_a.pk)
    assert sorted(pk for (pk,) in rows) == mine
    with pytest.raises(TenantScopeError, match="pass client_id"):
        sql_rows("test.messages", MESSAGES, [client_a.pk], client_id=None)
    with pytest.raises(TenantScopeError, match="bind it"):  # the client is not a parameter
        sql_rows("test.messages", MESSAGES, [client_b.pk], client_id=client_a.pk)
    with tenant_scope(client_b.pk), pytest.raises(TenantScopeError, match="out of reach"):
        sql_rows("test.messages", MESSAGES, [client_a.pk], client_id=client_a.pk)
    with tenant_scope(client_a.pk):
        assert sql_models("test.messages", Message, MESSAGES, [client_a.pk], client_id=client_a.pk)


def test_a_platform_site_takes_no_client(reviewed, client_a):
    assert sql_rows("test.one", "SELECT 1", client_id=None) == [(1,)]
    with pytest.raises(TenantScopeError, match="platform statement"):
        sql_rows("test.one", "SELECT 1", client_id=client_a.pk)


def test_the_reviewed_sites_still_answer(client_a, client_b):
    """A converted call site end to end, the widget's message read (one client's rows: tenant B
    asking for A's conversation gets nothing); beside it the widget's key lookup, which was a
    platform site and now reads the client row cache (apps/clients/rowcache.py)."""
    conversation = make_conversation_with_turn(client_a)[0]
    assert widget_client_by_key(key=client_a.widget_key) == client_a
    assert widget_client_by_key(key="no-such-key") is None
    mine = widget_message_events_after(
        client=client_a, conversation_id=conversation.pk, after=0, limit=50
    )
    assert mine
    theirs = widget_message_events_after(
        client=client_b, conversation_id=conversation.pk, after=0, limit=50
    )
    assert theirs == []


def test_the_module_is_the_only_home_of_raw_sql():
    assert tenant_sql.__doc__ and "scripts/tenancy_audit.py" in tenant_sql.__doc__
