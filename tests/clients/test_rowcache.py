"""The per-process cache of client rows (apps/clients/rowcache.py): the widget's key lookup and
every turn read a client and its plan from it. It must never serve a row this process changed,
never share one caller's instance with another, and never cache a client that does not exist."""

from __future__ import annotations

import pytest

from apps.clients import rowcache
from apps.clients.models import Client, Plan
from apps.clients.rowcache import client_cached
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


def test_a_second_read_costs_no_query(client_a, django_assert_num_queries):
    for lookup in ({"pk": client_a.pk}, {"widget_key": client_a.widget_key}):
        with django_assert_num_queries(1):  # the client and its plan, joined
            first = client_cached(**lookup)
            assert first is not None and first.plan.slug == "pro"
        with django_assert_num_queries(0):
            again = client_cached(**lookup)
            assert again is not None and again.pk == client_a.pk
            assert again.plan.ai_mode == client_a.plan.ai_mode  # the plan came along


def test_each_caller_gets_its_own_copy(client_a):
    one = client_cached(pk=client_a.pk)
    assert one is not None
    one.business_info["about"]["description"] = "changed by one request"
    one.allowed_origins.append("https://evil.example")
    one.plan.name = "changed too"
    other = client_cached(pk=client_a.pk)
    assert other is not None and other is not one
    assert other.business_info["about"]["description"] == "Acme sells things."
    assert other.allowed_origins == ["https://acme.example"]
    assert other.plan.name != "changed too"


@pytest.mark.parametrize("how", ["save", "queryset update", "plan save", "plan update"])
def test_a_change_in_this_process_is_seen_at_once(client_a, how):
    assert client_cached(pk=client_a.pk) is not None  # cached
    if how == "save":
        client_a.is_active = False
        client_a.save()
    elif how == "queryset update":
        Client.objects.filter(pk=client_a.pk).update(is_active=False)
    elif how == "plan save":
        client_a.plan.ai_mode = "standard"
        client_a.plan.save()
    else:
        Plan.objects.filter(pk=client_a.plan_id).update(ai_mode="standard")
    found = client_cached(pk=client_a.pk)
    assert found is not None
    if how.startswith("plan"):
        assert found.plan.ai_mode == "standard"
    else:
        assert found.is_active is False


def test_a_deleted_client_is_forgotten(plan):
    gone = ClientFactory(plan=plan)
    assert client_cached(pk=gone.pk) is not None
    gone.delete()
    assert client_cached(pk=gone.pk) is None


def test_a_missing_client_is_not_cached(plan, django_assert_num_queries):
    assert client_cached(widget_key="wk_not_yet") is None
    created = ClientFactory(plan=plan, widget_key="wk_not_yet")
    found = client_cached(widget_key="wk_not_yet")
    assert found is not None and found.pk == created.pk


def test_an_entry_expires(client_a, monkeypatch, django_assert_num_queries):
    monkeypatch.setattr(rowcache, "SECONDS", 0.0)  # every read goes to the database
    client_cached(pk=client_a.pk)
    with django_assert_num_queries(1):
        client_cached(pk=client_a.pk)
