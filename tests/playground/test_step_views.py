"""The step views (apps/reasoning/rendering.py) on the admin's trace page and the playground
page: both draw a playground run's steps from the same specification."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client as DjangoClient
from django.urls import reverse

from apps.reasoning.rendering import step_views_json
from tests.factories import UserFactory
from tests.playground.fixtures import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> DjangoClient:
    client = DjangoClient()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    return client


def test_the_admin_inline_shows_each_step_through_its_view(
    admin_client: Any, client_a: Any
) -> None:
    run = make_run(client_a)
    response = admin_client.get(
        reverse("admin:reasoning_reasoningtrace_change", args=[run.trace.pk])
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "<strong>Step 3/10</strong>" in page
    assert '<span class="gd-label">Termination</span>: target_reached' in page
    assert "Playground run “Can I return my boots?”" in page


def test_the_playground_page_embeds_the_specification(agent: Any, client_a: Any) -> None:
    run = make_run(client_a)
    response = agent.get(f"/console/playground/runs/{run.public_id}/?client={client_a.slug}")
    assert response.status_code == 200
    page = response.content.decode()
    embedded = re.search(
        r'<script id="gd-step-views" type="application/json">(.*?)</script>', page, re.S
    )
    assert embedded is not None
    assert json.loads(embedded.group(1)) == step_views_json()
    assert json.loads(embedded.group(1))["reason_step"]["title"] == "Step {step}/{max_steps}"
