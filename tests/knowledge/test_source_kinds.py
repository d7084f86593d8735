"""Knowledge source kinds are a registry (apps/knowledge/sources/, one module each): a kind
added in one module is accepted and handled by every surface — the model's choices, the
services' validation, the sync, the re-sync schedule, `manage.py knowledge_sync`, the admin,
the API and the tenant file — and nothing branches on a kind's name."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.knowledge import sources
from apps.knowledge.extract import Page
from apps.knowledge.models import Article, KnowledgeSource, SourceStatus
from apps.knowledge.serializers import SourceWriteSerializer
from apps.knowledge.services.articles import source_create
from apps.knowledge.services.sync import source_problem, source_sync, sources_due
from apps.knowledge.sources import SourceKind, SourceKindError
from apps.provisioning.services import client_export, tenant_import
from tests.conftest import api_for
from tests.factories import MembershipFactory
from tests.support.packages import importable, write_package
from tests.support.tenant_files import one_client_tenant

REPO = Path(__file__).resolve().parents[2]
KINDS = sources.names()


class Inline(SourceKind):
    """A kind a test adds: its one page is the text of its name after "Inline: "."""

    name = "inline"
    label = "Inline text (tests)"
    syncs = True
    resyncs = True

    def errors(self, source: KnowledgeSource) -> dict[str, str]:
        return {} if source.name.startswith("Inline: ") else {"name": "Starts with Inline:."}

    def run(self, sync: Any, fetcher: Any) -> None:
        sync.report("Reading the text.", total=1)
        sync.store("", Page(title="Inline", body=sync.source.name[8:]))
        sync.report(done=1)


@pytest.fixture
def inline() -> Iterator[SourceKind]:
    kind = sources.register(Inline())
    yield kind
    sources.unregister(kind.name)


def test_the_shipped_kinds_are_registered_in_order():
    assert KINDS == ["manual", "url", "sitemap", "file"]
    assert sources.names(syncs=True) == ["url", "sitemap", "file"]
    assert sources.names(resyncs=True) == ["url", "sitemap"]
    assert sources.tenant_file_names() == ["manual", "url", "sitemap"]


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_is_a_choice_of_the_model_and_the_api(name):
    kind = sources.get(name)
    assert kind is not None and kind.label and len(name) <= 10
    field = KnowledgeSource._meta.get_field("kind")
    assert name in [value for value, _label in field.choices]
    assert name in SourceWriteSerializer().fields["kind"].choices


@pytest.mark.django_db
def test_a_kind_added_in_one_module_is_picked_up_everywhere(
    inline, client, client_a, django_capture_on_commit_callbacks
):
    # the model, the services' validation (the kind's own rules) and the API
    assert ("inline", "Inline text (tests)") in KnowledgeSource._meta.get_field("kind").choices
    with pytest.raises(ApplicationError) as refused:
        source_create(client=client_a, data={"name": "Bad", "kind": "inline"})
    assert refused.value.extra["fields"] == {"name": ["Starts with Inline:."]}
    key = api_for(api_key_issue(client=client_a, name="k", role=Role.ADMIN)[1])
    with django_capture_on_commit_callbacks(execute=True):
        created = key.post(
            reverse("api-kb-source-list"),
            {"name": "Inline: From the API.", "kind": "inline"},
            format="json",
        )
    assert created.status_code == 201, created.content
    assert created.json()["kind"] == "inline"
    by_api = KnowledgeSource.objects.for_client(client_a).get(name="Inline: From the API.")
    assert source_problem(by_api) == ""

    # the admin: the form offers it, saving starts its sync, the sync runs the kind's import
    user = MembershipFactory(client=client_a, role=Role.ADMIN).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    client.force_login(user)
    add = reverse("admin:knowledge_knowledgesource_add")
    assert 'value="inline"' in client.get(add).content.decode()
    form = {"client": client_a.pk, "name": "Inline: Returns take 30 days.", "kind": "inline",
            "language": "en", "enabled": "on", "resync_hours": 1}  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(add, form, follow=True).status_code == 200
    source = KnowledgeSource.objects.for_client(client_a).get(name__endswith="30 days.")
    assert source.status == SourceStatus.SYNCED
    article = Article.objects.for_client(client_a).get(source=source)
    assert (article.title, article.body) == ("Inline", "Returns take 30 days.")

    # the sync service, the command and the beat's schedule
    assert source_sync(source=by_api)["created"] == 1
    call_command("knowledge_sync", "--client", client_a.slug, "--source", by_api.name)
    KnowledgeSource.objects.for_client(client_a).filter(pk=source.pk).update(last_synced_at=None)
    assert source in sources_due(limit=10)


@pytest.mark.django_db
def test_the_tenant_file_takes_and_exports_a_kind_that_allows_it(inline):
    tenant = one_client_tenant(
        "c", knowledge={"sources": [{"name": "Inline: Hello.", "kind": "inline"}]}
    )
    tenant_import(data=tenant)
    client = Client.objects.get(slug="c")
    exported = client_export(client=client)["knowledge"]["sources"]
    assert [(s["name"], s["kind"]) for s in exported] == [("Inline: Hello.", "inline")]
    Inline.in_tenant_file = False
    try:
        with pytest.raises(ApplicationError, match="Input should be"):
            tenant_import(data=tenant)
        assert client_export(client=client)["knowledge"]["sources"] == []
    finally:
        Inline.in_tenant_file = True


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    with importable(tmp_path, "extra_kinds_") as root:
        yield root


def test_a_kind_module_added_to_a_package_is_discovered(on_path):
    write_package(
        on_path,
        "extra_kinds_pkg",
        {
            "_helpers": "VALUE = 1\n",
            "inline": "from tests.knowledge.test_source_kinds import Inline\nKIND = Inline()\n",
        },
    )
    try:
        assert [k.name for k in sources.discover("extra_kinds_pkg")] == ["inline"]
        assert sources.names()[-1] == "inline"
    finally:
        sources.unregister("inline")


def test_an_incomplete_kind_is_refused(on_path):
    write_package(on_path, "extra_kinds_broken", {"half": "LABEL = 'no KIND here'\n"})
    with pytest.raises(SourceKindError, match="defines no KIND"):
        sources.discover("extra_kinds_broken")
    with pytest.raises(SourceKindError, match="syncs but defines no run"):
        sources.register(type("NoRun", (SourceKind,), {"name": "norun", "label": "x",
                                                       "syncs": True})())  # fmt: skip
    with pytest.raises(SourceKindError, match="1 to 10 characters"):
        sources.register(type("Long", (Inline,), {"name": "x" * 11})())
    with pytest.raises(SourceKindError, match="two source kinds"):
        sources.register(type("Url2", (Inline,), {"name": "url"})())


def _kind_branches(path: Path) -> list[str]:
    """`kind == "<a kind>"` / `kind != …` / `kind in (…)` comparisons and `SourceKind.<X>`
    attributes in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in {"MANUAL", "URL", "SITEMAP", "FILE"}:
            found.append(f"{path}:{node.lineno}")
        if isinstance(node, ast.Compare):
            names = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            if any(c.value in KINDS for c in names) and "kind" in ast.unparse(node):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_branches_on_a_source_kind_outside_its_module():
    callers = [
        *(REPO / "apps/knowledge").rglob("*.py"),
        *(REPO / "apps/provisioning").rglob("*.py"),
    ]
    checked = [p for p in callers if "sources" not in p.parts and "migrations" not in p.parts]
    assert [hit for path in checked for hit in _kind_branches(path)] == []
