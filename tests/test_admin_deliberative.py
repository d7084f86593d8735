"""The conversation debug view of a deliberative turn: every reasoning step as a card with its
scores, rationale and the server's feedback, the refinement states and how the loop ended —
server-rendered, from the turn the offline demo model ran end to end."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.conversations.services import conversation_create
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import handle_turn
from tests.factories import ClientFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def deliberative_turn(settings, django_capture_on_commit_callbacks):
    settings.OPENAI_API_KEY = ""  # the offline demo model's scripted deliberation
    client = ClientFactory(plan=PlanFactory(slug="deep", ai_mode="deliberative"))
    conversation = conversation_create(client=client)[0]
    with django_capture_on_commit_callbacks(execute=True):
        handle_turn(client=client, conversation=conversation, text="What is your returns policy?")
    return conversation


def test_the_debug_view_shows_each_step_with_scores_feedback_and_refinement(
    client, deliberative_turn
):
    client.force_login(UserFactory(is_superuser=True))
    url = reverse("admin:conversations_conversation_change", args=[deliberative_turn.pk])
    body = client.get(url).content.decode()

    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    end = trace.steps.get(name="deliberation_end").output
    steps = end["steps"]
    assert steps >= 4
    cards = re.findall(r'data-card="(\d+)"', body)
    assert cards == [str(n) for n in range(1, steps + 1)]
    assert f"Step 1/{end['max_steps']}" in body
    # per-principle scores as meters, the rationale and the server's feedback
    for key in ("grounded", "policy_compliant", "helpful_complete", "caring_tone"):
        assert f"<td>{key}</td>" in body
    assert body.count("<meter") == 4 * steps
    assert "Rationale:" in body
    assert body.count("Server feedback:") == steps - 1  # none after the last step
    # refinement states in order, the critique's issue quoting its sentence
    states = re.findall(r'data-state="(\w+)"', body)
    assert states[:3] == ["draft", "critique", "final_spec"]
    assert 'class="gd-issue-quote"' in body and "missing_info" in body
    assert f'data-termination="{end["termination"]}"' in body
    assert "stopped when the answer was good enough" in body or "stopped at the most" in body
    assert f"ended by <code>{end['termination']}</code>" not in body  # words, not codes
    # the legend explains the deliberative kinds
    for words in (
        "one step of the reasoning loop",
        "feedback after a step",
        "best-scoring version",
    ):
        assert words in body


def test_another_tenants_staff_cannot_open_the_deliberative_turn(client, deliberative_turn):
    from tests.factories import MembershipFactory

    other = ClientFactory()
    user = UserFactory(is_staff=True)
    MembershipFactory(user=user, client=other)
    client.force_login(user)
    url = reverse("admin:conversations_conversation_change", args=[deliberative_turn.pk])
    response = client.get(url)
    assert response.status_code in (302, 403, 404)
    assert b"data-card" not in response.content
