"""Case CRUD services: every write validated by the case format, errors named by their place,
names unique per client, and an export that imports back to the same cases."""

from __future__ import annotations

import pytest

from apps.core.exceptions import ApplicationError
from apps.simulations.cases import (
    cases_export,
    cases_import,
    simcase_create,
    simcase_delete,
    simcase_update,
)
from apps.simulations.schema import case_validate
from tests.simulations.factories_sim import case_data, case_rows

pytestmark = pytest.mark.django_db


def rows(client):
    return case_rows(client, "suite", "turns", "enabled")


def test_create_stores_the_normalized_case(client_a):
    case = simcase_create(client=client_a, data=case_data())
    assert case.client == client_a
    assert case.suite == "demo"
    assert case.turns[1]["customer"] == "Yes, cancel it"
    assert case.tools == case_validate(case_data())["tools"]
    assert "cancelled" in str(case.tools["cancel_order"])
    assert case.repeat == 1 and case.enabled is True


def test_create_refuses_an_invalid_case_naming_the_place(client_a):
    data = case_data()
    data["turns"][1]["expect"]["escalated"] = "perhaps"
    with pytest.raises(ApplicationError) as caught:
        simcase_create(client=client_a, data=data)
    fields = caught.value.extra["fields"]
    assert any(path.startswith("turns[1].expect") for path in fields), fields
    assert rows(client_a) == []


def test_names_are_unique_per_client_only(client_a, client_b):
    simcase_create(client=client_a, data=case_data())
    with pytest.raises(ApplicationError) as caught:
        simcase_create(client=client_a, data=case_data())
    assert "name" in caught.value.extra["fields"]
    simcase_create(client=client_b, data=case_data())  # another client may use the name
    assert len(rows(client_a)) == len(rows(client_b)) == 1


def test_partial_update_revalidates_the_whole_case(client_a):
    case = simcase_create(client=client_a, data=case_data())
    simcase_update(client=client_a, case=case, data={"enabled": False}, partial=True)
    case.refresh_from_db()
    assert case.enabled is False and len(case.turns) == 2
    with pytest.raises(ApplicationError):
        simcase_update(client=client_a, case=case, data={"turns": "not a list"}, partial=True)
    case.refresh_from_db()
    assert len(case.turns) == 2


def test_another_clients_case_cannot_be_changed_or_deleted(client_a, client_b):
    case = simcase_create(client=client_a, data=case_data())
    with pytest.raises(ApplicationError):
        simcase_update(client=client_b, case=case, data={"enabled": False}, partial=True)
    with pytest.raises(ApplicationError):
        simcase_delete(client=client_b, case=case)
    case.refresh_from_db()
    assert case.enabled is True


def test_export_imports_back_unchanged_and_into_another_client(client_a, client_b):
    simcase_create(client=client_a, data=case_data())
    simcase_create(client=client_a, data=case_data("greeting", suite="smoke", tags=[]))
    exported = cases_export(client=client_a)
    assert [c["name"] for c in exported] == ["cancel-confirmed", "greeting"]
    before = rows(client_a)
    assert cases_import(client=client_a, data=exported) == {
        "created": 0,
        "updated": 0,
        "unchanged": 2,
        "deleted": 0,
    }
    assert rows(client_a) == before
    assert cases_import(client=client_b, data=exported)["created"] == 2
    assert [r[1:] for r in rows(client_b)] == [r[1:] for r in before]
    assert cases_export(client=client_b) == exported
    assert [c["name"] for c in cases_export(client=client_a, suite="smoke")] == ["greeting"]


def test_import_is_all_or_nothing_and_names_each_bad_case(client_a):
    good = case_data("good")
    bad = case_data("bad")
    bad["turns"] = [{"expect": {}}]  # no customer message
    with pytest.raises(ApplicationError) as caught:
        cases_import(client=client_a, data=[good, bad, case_data("good")])
    fields = caught.value.extra["fields"]
    assert any(path.startswith("[1].") for path in fields), fields
    assert fields["[0].name"].startswith("duplicate")
    assert rows(client_a) == []


def test_import_updates_by_name_and_replace_suite_deletes_the_rest(client_a):
    cases_import(client=client_a, data=[case_data("one"), case_data("two")])
    simcase_create(client=client_a, data=case_data("elsewhere", suite="other"))
    counts = cases_import(
        client=client_a, data=[case_data("one", enabled=False)], replace_suite=True
    )
    assert counts == {"created": 0, "updated": 1, "unchanged": 0, "deleted": 1}
    assert [(r[0], r[3]) for r in rows(client_a)] == [("elsewhere", True), ("one", False)]
