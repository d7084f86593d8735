"""Migration 0002: every client's `business_info["faqs"]` becomes FAQ articles and leaves the
JSON, and the reverse puts them back — checked with the demo tenant on the real migration
graph: nothing lost either way."""

from __future__ import annotations

import pytest

from apps.clients.models import Client
from apps.knowledge.models import Article, ArticleChunk, ArticleKind
from apps.knowledge.selectors import business_info_for, faqs_for, search_chunks
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from tests.conftest import DEMO_TENANT
from tests.factories import ClientFactory
from tests.support.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("knowledge", "0001_initial")]
AFTER = [("knowledge", "0002_faqs_from_business_info")]


def demo_business_info() -> dict:
    (client,) = load_tenant_file(DEMO_TENANT)["clients"]
    return client["business_info"]


def test_the_demo_tenants_faqs_become_articles_and_nothing_is_lost(at_latest):
    demo = demo_business_info()
    assert len(demo["faqs"]) >= 10  # the demo ships its FAQs in the JSON
    client = Client.objects.get(pk=ClientFactory(slug="trailhead-old", language="en-GB").pk)
    other = Client.objects.get(pk=ClientFactory(slug="no-faqs", business_info={}).pk)
    old = migrate(BEFORE)
    OldClient = old.get_model("clients", "Client")
    OldClient.objects.filter(pk=client.pk).update(business_info=demo)

    migrate(AFTER)
    migrate(latest())
    client.refresh_from_db()
    other.refresh_from_db()
    assert "faqs" not in client.business_info
    assert client.business_info == {k: v for k, v in demo.items() if k != "faqs"}
    assert other.business_info == {}
    rows = list(Article.objects.for_client(client).order_by("pk"))
    assert [(a.title, a.body) for a in rows] == [(f["question"], f["answer"]) for f in demo["faqs"]]
    assert {(a.kind, a.status, a.enabled, a.language) for a in rows} == {
        (ArticleKind.FAQ, "published", True, "en")
    }
    assert all(a.content_hash == a.refresh_hash() == a.indexed_hash for a in rows)
    assert ArticleChunk.objects.for_client(client).count() == len(demo["faqs"])
    # the assistant's document is the same as before, the FAQs now come from the articles
    info = business_info_for(client)
    assert sorted(info["faqs"], key=lambda f: f["question"]) == sorted(
        demo["faqs"], key=lambda f: f["question"]
    )
    assert {k: v for k, v in info.items() if k != "faqs"} == client.business_info
    first = demo["faqs"][0]["question"]
    assert any(hit.title == first for hit in search_chunks(client=client, query=first))


def test_the_reverse_puts_the_demo_faqs_back(at_latest):
    """The demo tenant imported as it ships (its FAQs become articles), migrated back and
    forward again: the same FAQs each time."""
    tenant_import(data=load_tenant_file(DEMO_TENANT))
    client = Client.objects.get(slug="trailhead")
    imported = faqs_for(client=client)
    assert imported and "faqs" not in client.business_info
    old = migrate(BEFORE)
    back = old.get_model("clients", "Client").objects.get(pk=client.pk).business_info
    key = lambda faq: faq["question"]  # noqa: E731
    assert sorted(back["faqs"], key=key) == sorted(imported, key=key)
    old_articles = old.get_model("knowledge", "Article").objects.filter(client_id=client.pk)
    assert not old_articles.filter(kind="faq").exists()  # the help-centre articles stay

    migrate(AFTER)
    migrate(latest())
    client.refresh_from_db()
    assert "faqs" not in client.business_info
    assert sorted(faqs_for(client=client), key=key) == sorted(imported, key=key)
