import pytest
from django.apps import apps as django_apps
from django.db import models
from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone

from apps.accounts.models import ApiKey, Membership
from apps.conversations.models import Conversation, Message
from apps.core.models import TenantOwnedModel
from apps.core.tenancy import TenantQuerySet, TenantScopeError, current_tenant, tenant_scope
from apps.tools.models import ClientTool
from tests.api.conftest import make_conversation_with_turn
from tests.factories import ClientToolFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def test_for_client_returns_only_that_tenants_rows(client_a, client_b):
    tool_a = ClientToolFactory(client=client_a, name="lookup")
    tool_b = ClientToolFactory(client=client_b, name="lookup")
    MembershipFactory(client=client_a)
    assert list(ClientTool.objects.for_client(client_a)) == [tool_a]
    assert list(ClientTool.objects.for_client(client_b)) == [tool_b]
    assert Membership.objects.for_client(client_b).count() == 0
    assert ApiKey.objects.for_client(client_a).count() == 0


def test_for_client_refuses_a_missing_tenant(client_a):
    with pytest.raises(ValueError, match="saved client"):
        ClientTool.objects.for_client(None)


# ---------------------------------------------------------------------------------------------
# The default manager of every tenant-owned model fails closed (apps/core/tenancy.py).
# ---------------------------------------------------------------------------------------------

TENANT_MODELS = sorted(
    (m for m in django_apps.get_models() if issubclass(m, TenantOwnedModel)),
    key=lambda m: m._meta.label,
)


def test_every_tenant_owned_model_is_walked():
    labels = {m._meta.label for m in TENANT_MODELS}
    assert {"conversations.Message", "accounts.ApiKey", "billing.UsageRecord"} <= labels
    assert len(TENANT_MODELS) >= 20


@pytest.mark.parametrize("model", TENANT_MODELS, ids=lambda m: m._meta.label)
def test_an_unscoped_query_raises(model):
    assert model._default_manager is model.objects
    refused = [
        lambda: list(model.objects.all()),
        lambda: model.objects.count(),
        lambda: model.objects.filter(pk=1).exists(),
        lambda: model.objects.filter(pk=1).first(),
        lambda: model.objects.aggregate(n=Count("pk")),
        lambda: model.objects.update(updated_at=timezone.now()),
        lambda: model.objects.all().delete(),
        lambda: list(model.objects.exclude(client_id=1)),  # a negated filter does not scope
        lambda: list(model.objects.filter(Q(client_id=1) | Q(pk=1))),  # nor one OR branch
    ]
    for query in refused:
        with pytest.raises(TenantScopeError, match=model.__name__):
            query()


@pytest.mark.parametrize("model", TENANT_MODELS, ids=lambda m: m._meta.label)
def test_for_client_and_unscoped_run(model, client_a):
    assert list(model.objects.for_client(client_a)) == []
    assert model.objects.filter(client_id=client_a.pk).count() == 0
    assert model.objects.filter(client__in=[client_a]).exists() is False
    assert model.objects.for_client(client_a).update(updated_at=timezone.now()) == 0
    assert model.objects.unscoped("the test looks at every client").count() == 0
    assert model.objects.unscoped("x").filter(pk=1).first() is None


@pytest.mark.parametrize("model", TENANT_MODELS, ids=lambda m: m._meta.label)
def test_unscoped_needs_a_reason(model):
    for reason in ("", "   "):
        with pytest.raises(TenantScopeError, match="needs a reason"):
            model.objects.unscoped(reason)


@pytest.mark.parametrize("model", TENANT_MODELS, ids=lambda m: m._meta.label)
def test_djangos_base_manager_stays_plain(model):
    assert not isinstance(model._base_manager.all(), TenantQuerySet)


def test_a_tenant_owned_parent_scopes_the_query(client_a, client_b):
    data = make_conversation_with_turn(client_a)[0]
    other = make_conversation_with_turn(client_b)[0]
    mine = list(Message.objects.filter(conversation=data).order_by("seq"))
    assert mine and all(m.client_id == client_a.pk for m in mine)
    assert list(data.messages.order_by("seq")) == mine  # a related manager
    assert Message.objects.filter(conversation__in=[data, other]).count() > len(mine)
    # A subquery given to `parent__in` must be scoped itself.
    scoped_parents = Conversation.objects.for_client(client_a)
    assert Message.objects.filter(conversation__in=scoped_parents).count() == len(mine)
    with pytest.raises(TenantScopeError, match="Message"):
        Message.objects.filter(conversation__in=Conversation.objects.all()).count()
    # Prefetching a tenant-owned relation is scoped by its parents.
    loaded = Conversation.objects.for_client(client_a).prefetch_related("messages").get()
    assert sorted(m.pk for m in loaded.messages.all()) == sorted(m.pk for m in mine)


# ---------------------------------------------------------------------------------------------
# A bare parent id is no scope: it could name any client's row.
# ---------------------------------------------------------------------------------------------

PARENT_KEYS = sorted(
    (
        (model, field)
        for model in TENANT_MODELS
        for field in model._meta.concrete_fields
        if isinstance(field, models.ForeignKey)
        and issubclass(field.related_model, TenantOwnedModel)
    ),
    key=lambda pair: (pair[0]._meta.label, pair[1].name),
)


def test_every_parent_key_is_walked():
    names = {f"{model._meta.label}.{field.name}" for model, field in PARENT_KEYS}
    assert {"conversations.Message.conversation", "reasoning.ReasoningStep.trace"} <= names
    assert len(PARENT_KEYS) >= 20


@pytest.mark.parametrize(
    ("model", "field"), PARENT_KEYS, ids=lambda x: getattr(x, "name", getattr(x, "__name__", ""))
)
def test_a_bare_parent_id_does_not_scope(model, field, client_a):
    bare_ids = [
        {field.attname: 999},
        {field.name: 999},
        {f"{field.name}__in": [998, 999]},
        {f"{field.name}__id": 999},
        {f"{field.name}__pk__in": [999]},
    ]
    for lookup in bare_ids:
        with pytest.raises(TenantScopeError, match=model.__name__):
            model.objects.filter(**lookup).exists()
        # Beside a client filter the same id is fine.
        assert model.objects.for_client(client_a).filter(**lookup).exists() is False
    parent = field.related_model(pk=999)  # a row as loaded: its pk set
    assert model.objects.filter(**{field.name: parent}).exists() is False
    assert model.objects.filter(**{f"{field.name}__in": [parent]}).exists() is False


def test_another_tenants_conversation_id_reads_nothing(client_a, client_b):
    """The case the guard once let through: tenant B's code holding the id of tenant A's
    conversation. Unscoped it raises; scoped to B (explicitly or by tenant_scope) it finds
    nothing; A's messages are untouched."""
    theirs = make_conversation_with_turn(client_a)[0]
    before = sorted(
        Message.objects.for_client(client_a).values_list("pk", "text", "conversation_id")
    )
    assert before
    for leak in (
        lambda: list(Message.objects.filter(conversation_id=theirs.pk)),
        lambda: Message.objects.filter(conversation=theirs.pk).count(),
        lambda: Message.objects.filter(conversation__in=[theirs.pk]).update(text="stolen"),
        lambda: Message.objects.filter(conversation__id=theirs.pk).delete(),
        lambda: Message.objects.filter(
            conversation__in=Subquery(Conversation.objects.filter(pk=theirs.pk).values("pk"))
        ).count(),
    ):
        with pytest.raises(TenantScopeError, match="Message"):
            leak()
    assert list(Message.objects.for_client(client_b).filter(conversation_id=theirs.pk)) == []
    with tenant_scope(client_b.pk):
        assert list(Message.objects.filter(conversation_id=theirs.pk)) == []
        assert Message.objects.filter(conversation_id=theirs.pk).update(text="stolen") == 0
    after = sorted(
        Message.objects.for_client(client_a).values_list("pk", "text", "conversation_id")
    )
    assert after == before


def test_a_scoped_subquery_or_outer_row_scopes(client_a, client_b):
    mine = make_conversation_with_turn(client_a)[0]
    make_conversation_with_turn(client_b)
    mine_ids = Subquery(Conversation.objects.for_client(client_a).values("pk"))
    count = Message.objects.filter(conversation__in=mine_ids).count()
    assert count == Message.objects.for_client(client_a).count() > 0
    # A correlated subquery is bound to the enclosing (scoped) query's rows.
    latest = Message.objects.filter(conversation=OuterRef("pk")).order_by("-seq").values("seq")
    annotated = Conversation.objects.for_client(client_a).annotate(last=Subquery(latest[:1]))
    assert annotated.get().last == max(m.seq for m in mine.messages.all())


def test_django_internals_need_no_scope(client_a):
    conversation = make_conversation_with_turn(client_a)[0]
    message = Message.objects.for_client(client_a).first()
    assert message.conversation == conversation  # FK access: the base manager
    message.refresh_from_db()
    message.text = "edited"
    message.save()
    Message.objects.for_client(client_a).filter(pk=message.pk).update(text="again")
    client_a.delete()  # cascades through every tenant-owned table
    assert Message.objects.unscoped("after the cascade").count() == 0


# ---------------------------------------------------------------------------------------------
# The tenant context.
# ---------------------------------------------------------------------------------------------


def test_tenant_scope_scopes_an_otherwise_unscoped_query(client_a, client_b):
    mine = make_conversation_with_turn(client_a)[0]
    theirs = make_conversation_with_turn(client_b)[0]
    with tenant_scope(client_a.pk):
        assert current_tenant() == client_a.pk
        assert list(Conversation.objects.all()) == [mine]
        assert Conversation.objects.count() == 1
        assert Conversation.objects.filter(pk=theirs.pk).first() is None
        assert Conversation.objects.filter(client=client_b).exists() is False
        assert Conversation.objects.filter(pk=theirs.pk).update(status="closed") == 0
        assert Conversation.objects.for_current_client().get() == mine
        with pytest.raises(TenantScopeError, match="another client"):
            Conversation.objects.for_client(client_b)
        with (
            pytest.raises(TenantScopeError, match="inside tenant_scope"),
            tenant_scope(client_b.pk),
        ):
            pass
        with tenant_scope(client_a.pk):  # the same client may nest
            assert Conversation.objects.count() == 1
        # Explicitly unscoped work still crosses tenants (and says why).
        assert Conversation.objects.unscoped("the test crosses").count() == 2
    assert current_tenant() is None
    theirs.refresh_from_db()
    assert theirs.status != "closed"
    with pytest.raises(TenantScopeError, match="outside tenant_scope"):
        Conversation.objects.for_current_client()
    with pytest.raises(TenantScopeError):
        Conversation.objects.count()


def test_writes_of_rows_already_held_need_no_scope(client_a):
    conversation = make_conversation_with_turn(client_a)[0]
    messages = list(Message.objects.filter(conversation=conversation))
    for message in messages:
        message.text = "rewritten"
    assert Message.objects.bulk_update(messages, ["text"]) == len(messages)
    assert set(conversation.messages.values_list("text", flat=True)) == {"rewritten"}
