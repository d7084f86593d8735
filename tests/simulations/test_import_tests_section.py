"""The tenant file's `tests` section: a client's simulation test cases imported with the client
(JSON or YAML), validated with the rest of the file (errors name their path, nothing changes),
idempotent, and the export of a client's cases is a `tests` section that imports back."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from apps.clients.models import Client
from apps.provisioning.files import load_tenant_file
from apps.simulations.cases import cases_export
from apps.simulations.models import SimCase
from tests.conftest import DEMO_TENANT
from tests.simulations.factories_sim import case_data

pytestmark = pytest.mark.django_db


def tenant_with_tests(*cases) -> dict:
    data = load_tenant_file(DEMO_TENANT)
    data["clients"][0]["tests"] = list(cases)
    return data


def cases_in_db() -> list[tuple]:
    return list(
        SimCase.objects.unscoped("test checks the database directly")
        .order_by("name")
        .values_list("client__slug", "name", "suite", "updated_at")
    )


def import_file(path) -> str:
    out = StringIO()
    call_command("import_client", str(path), stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_tests_section_imports_the_cases_idempotently(tmp_path, suffix):
    data = tenant_with_tests(case_data("cancel-confirmed"), case_data("greeting", tags=["hi"]))
    path = tmp_path / f"tenant{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    import_file(path)
    first = cases_in_db()
    assert [(slug, name) for slug, name, *_ in first] == [
        ("trailhead", "cancel-confirmed"),
        ("trailhead", "greeting"),
    ]
    import_file(path)
    assert cases_in_db() == first  # not even a timestamp changed


def test_a_bad_case_is_named_by_its_path_and_nothing_changes(tmp_path):
    bad = case_data("bad")
    bad["turns"][0]["expect"]["escalated"] = "sometimes"
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(tenant_with_tests(case_data("good"), bad)))
    with pytest.raises(CommandError) as caught:
        import_file(path)
    assert "clients[0].tests[1].turns[0].expect" in str(caught.value)
    assert "Nothing was changed." in str(caught.value)
    assert cases_in_db() == []
    assert not Client.objects.filter(slug="trailhead").exists()


def test_repeated_case_names_are_refused(tmp_path):
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(tenant_with_tests(case_data("same"), case_data("same"))))
    with pytest.raises(CommandError, match=r"clients\[0\]\.tests\[1\]\.name: duplicate"):
        import_file(path)


def test_invalid_yaml_says_where(tmp_path):
    path = tmp_path / "tenant.yml"
    path.write_text("clients: [\n  {slug: x\n")
    with pytest.raises(CommandError, match="not valid YAML"):
        import_file(path)


def test_an_export_is_a_tests_section_that_imports_back(tmp_path):
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(tenant_with_tests(case_data("one"), case_data("two"))))
    import_file(path)
    client = Client.objects.get(slug="trailhead")
    exported = cases_export(client=client)
    SimCase.objects.for_client(client).delete()
    path.write_text(json.dumps(tenant_with_tests(*exported)))
    import_file(path)
    assert cases_export(client=client) == exported
