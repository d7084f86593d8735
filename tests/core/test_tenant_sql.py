"""Raw SQL runs only as a reviewed site (apps/core/tenant_sql.py), bound to its client."""

from __future__ import annotations

import pytest
from django.core.exceptions import FieldDoesNotExist

from apps.conversations.models import Message
from apps.conversations.selectors import conversation_by_id
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


def _one_message(client_id: int, pk: int, columns: str) -> list[Message]:
    return sql_models(
        "test.messages",
        Message,
        f"SELECT {columns} FROM {Message._meta.db_table}"  # noqa: S608
        " WHERE client_id = %s AND id = %s",
        [client_id, pk],
        client_id=client_id,
    )


def test_sql_models_builds_the_rows_as_the_orm_does(reviewed, client_a):
    """Whole rows come back as the ORM's own instances would: every field equal and of the same
    type (datetimes, UUIDs, JSON, decimals after the backend's converters), saved-state set."""
    conversation, trace = make_conversation_with_turn(client_a)
    message = trace.user_message
    message.data = {"confirm": {"answer": "yes"}, "n": [1, 2.5, None]}
    message.save(update_fields=["data"])
    orm = Message.objects.for_client(client_a).get(pk=message.pk)
    (plain,) = _one_message(client_a.pk, message.pk, tenant_sql.model_columns(Message))
    for field in Message._meta.concrete_fields:
        mine, theirs = getattr(plain, field.attname), getattr(orm, field.attname)
        assert (mine, type(mine)) == (theirs, type(theirs)), field.name
    assert plain._state.adding is False and plain._state.db == "default"
    plain.text = "edited"
    plain.save(update_fields=["text"])  # a saved row: an UPDATE, not a second INSERT
    assert Message.objects.for_client(client_a).get(pk=message.pk).text == "edited"
    assert conversation_by_id(client_id=client_a.pk, public_id=conversation.public_id) == (
        conversation
    )


def test_sql_models_defers_what_it_does_not_select_and_keeps_other_columns(reviewed, client_a):
    message = make_conversation_with_turn(client_a)[1].user_message
    (plain,) = _one_message(client_a.pk, message.pk, "id, seq, 41 + 1 AS answer")
    assert (plain.pk, plain.seq, plain.answer) == (message.pk, message.seq, 42)
    assert plain.get_deferred_fields() >= {"text", "data", "created_at"}
    assert plain.text == message.text  # a deferred field loads on access, as with raw()
    with pytest.raises(FieldDoesNotExist, match="primary key"):
        sql_models(
            "test.messages",
            Message,
            MESSAGES.replace("id", "seq", 1),
            [client_a.pk],
            client_id=client_a.pk,
        )
    assert sql_models("test.messages", Message, MESSAGES, [-1], client_id=-1) == []


def test_sql_insert_writes_the_row_save_would(client_a):
    """The hot inserts (a message, a trace, a step, a usage record) as `save(force_insert=True)`
    writes them: defaults and stamps filled in, values prepared by their fields, the key read
    back; the same IntegrityError; an unsaved related object refused."""
    from django.db import IntegrityError, transaction

    from apps.conversations.models import Role
    from apps.reasoning.models import ReasoningTrace

    conversation = make_conversation_with_turn(client_a)[0]
    message = tenant_sql.sql_insert(
        "conversations.message_insert",
        Message(
            client=client_a,
            conversation=conversation,
            seq=99,
            role=Role.USER,
            text="Wo ist meine Bestellung?",
            data={"confirm": {"answer": "yes"}, "n": [1, 2.5, None]},
        ),
    )
    assert message.pk and not message._state.adding and message.created_at and message.public_id
    stored = Message.objects.for_client(client_a).get(pk=message.pk)
    for field in Message._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(message, field.attname), field.name
    with pytest.raises(IntegrityError), transaction.atomic():  # (conversation, seq) is unique
        tenant_sql.sql_insert(
            "conversations.message_insert",
            Message(client=client_a, conversation=conversation, seq=99, role=Role.USER),
        )
    unsaved = Message(client=client_a, conversation=conversation, seq=100, role=Role.USER)
    unsaved.trace = ReasoningTrace(client=client_a)
    with pytest.raises(ValueError, match="unsaved related object"):
        tenant_sql.sql_insert("conversations.message_insert", unsaved)
    with pytest.raises(TenantScopeError, match="not reviewed"):
        tenant_sql.sql_insert("test.unknown", Message(client=client_a, conversation=conversation))


def test_sql_insert_leaves_a_model_with_save_receivers_to_django(client_a):
    from django.db.models.signals import post_save

    seen = []

    def receiver(sender, instance, created, **kwargs):
        seen.append((instance.seq, created))

    conversation = make_conversation_with_turn(client_a)[0]
    post_save.connect(receiver, sender=Message, dispatch_uid="test-sql-insert")
    try:
        message = tenant_sql.sql_insert(
            "conversations.message_insert",
            Message(client=client_a, conversation=conversation, seq=77, role="user", text="hi"),
        )
    finally:
        post_save.disconnect(sender=Message, dispatch_uid="test-sql-insert")
    assert seen == [(77, True)] and message.pk
