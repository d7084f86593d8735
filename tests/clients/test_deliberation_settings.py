"""A plan's deliberative-mode settings live in one validated JSON field (`Plan.deliberation`),
read through `deliberation_settings(plan)`, written through `deliberation_settings_set`, and
edited in the plan admin as one row per setting."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from pydantic import ValidationError

from apps.clients.deliberation import (
    DELIBERATION_ROWS,
    DeliberationSettings,
    deliberation_settings,
    deliberation_settings_set,
)
from apps.clients.models import Plan
from tests.factories import PlanFactory, UserFactory


def test_every_setting_has_one_admin_row_and_no_column_of_its_own() -> None:
    """A setting added to the model without a row (or a row left for a removed one) fails."""
    assert set(DeliberationSettings.model_fields) == set(DELIBERATION_ROWS)
    columns = {field.name for field in Plan._meta.get_fields()}
    assert not columns & set(DELIBERATION_ROWS.values())
    assert "deliberation" in columns


def test_a_missing_key_reads_as_its_default_and_a_bad_value_is_refused() -> None:
    plan = Plan(slug="p", name="P", deliberation={"max_steps": 6})
    own = deliberation_settings(plan)
    assert (own.min_steps, own.max_steps, own.target) == (None, 6, None)
    assert (own.refinement_iterations, own.refinement_stop_score) == (2, 90)
    assert Plan(slug="q", name="Q").deliberation == DeliberationSettings().model_dump()
    for bad in ({"refinement_iterations": 6}, {"refinement_stop_score": 0}, {"rounds": 1}):
        with pytest.raises(ValidationError):
            deliberation_settings_set(plan, **bad)
    assert deliberation_settings(plan).max_steps == 6  # unchanged by a refused write


def test_a_copy_of_the_plan_never_shares_the_live_settings() -> None:
    """A simulation's side changes its in-memory copy of the plan only."""
    live = Plan(slug="p", name="P")
    side = copy.copy(live)
    deliberation_settings_set(side, refinement_iterations=0, target=Decimal("0.8756"))
    assert deliberation_settings(live).refinement_iterations == 2
    assert deliberation_settings(side).refinement_iterations == 0
    assert deliberation_settings(side).target == 0.876  # three places, as the column had


@pytest.mark.django_db
def test_the_plan_admin_edits_each_setting_on_its_own_row(client: Any) -> None:
    client.force_login(UserFactory(is_superuser=True))
    plan = PlanFactory()
    url = reverse("admin:clients_plan_change", args=[plan.pk])
    page = client.get(url)
    for row in DELIBERATION_ROWS.values():
        assert f'name="{row}"' in page.content.decode()
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k != "post_draft_hooks"}
    data.update(
        deliberation_min_steps=2,
        deliberation_max_steps=8,
        deliberation_target="0.8",
        refinement_iterations=1,
        refinement_stop_score=80,
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    plan.refresh_from_db()
    assert plan.deliberation == {
        "min_steps": 2,
        "max_steps": 8,
        "target": 0.8,
        "refinement_iterations": 1,
        "refinement_stop_score": 80,
    }
    # An empty step row inherits the rubric's again; a bound is checked on its own row.
    data.update(deliberation_max_steps="", refinement_iterations=6)
    refused = client.post(url, data)
    assert refused.status_code == 200
    assert "refinement_iterations" in refused.context["adminform"].form.errors
    data.update(refinement_iterations=0, deliberation_min_steps=12)
    clash = client.post(url, data)
    errors = clash.context["adminform"].form.errors
    assert "the other value comes from the rubric" in errors["deliberation_min_steps"][0]
    data.update(deliberation_min_steps="")
    assert client.post(url, data).status_code == 302
    plan.refresh_from_db()
    own = deliberation_settings(plan)
    assert (own.min_steps, own.max_steps, own.refinement_iterations) == (None, None, 0)
