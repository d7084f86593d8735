"""Post-draft hooks: after the mode's draft, before the reply is stored and sent. A hook may
replace the reply, lower its confidence or hand the conversation to a person; a failing hook
never loses the reply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from apps.clients.models import Plan
from apps.escalations.models import Escalation
from apps.reasoning.hooks import Draft, post_draft_hook, unregister_hook
from apps.reasoning.models import ReasoningStep
from tests.factories import PlanFactory, UserFactory
from tests.support.shop import Chat, assess

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooks() -> Iterator[None]:
    @post_draft_hook("test_polish")
    def polish(turn: Any, draft: Draft) -> None:
        draft.replace(draft.text + " (checked)", why="test")
        draft.lower_confidence(3, why="test")

    @post_draft_hook("test_handoff")
    def handoff(turn: Any, draft: Draft) -> None:
        draft.hand_to_human("policy", "a reviewer wants a person to answer")

    @post_draft_hook("test_broken")
    def broken(turn: Any, draft: Draft) -> None:
        draft.replace("half-written")
        raise RuntimeError("the checker crashed")

    yield
    for name in ("test_polish", "test_handoff", "test_broken"):
        unregister_hook(name)


def use_hooks(chat: Chat, *names: str) -> None:
    Plan.objects.filter(pk=chat.client.plan_id).update(post_draft_hooks=list(names))
    chat.client.plan.refresh_from_db()


def test_no_hooks_by_default_the_draft_goes_out(chat: Chat, llm: Any) -> None:
    assert chat.client.plan.post_draft_hooks == []
    llm.script("assess", assess(response="We ship worldwide."))

    replies = chat.say("Do you ship abroad?")

    assert [r.text for r in replies] == ["We ship worldwide."]
    assert (
        not ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="hook")
        .exists()
    )


def test_a_hook_replaces_the_reply_and_lowers_confidence(chat: Chat, llm: Any, hooks: None) -> None:
    use_hooks(chat, "test_polish")
    llm.script("assess", assess(response="We ship worldwide.", confidence=8))

    replies = chat.say("Do you ship abroad?")

    assert [r.text for r in replies] == ["We ship worldwide. (checked)"]
    assert replies[0].data["confidence"] == 3
    step = ReasoningStep.objects.unscoped("test checks the database directly").get(name="hook")
    assert step.input_summary == "test_polish"
    assert step.output["changes"][0]["replace"] == {
        "from": "We ship worldwide.",
        "to": "We ship worldwide. (checked)",
    }
    assert step.output["changes"][1]["confidence"] == {"from": 8, "to": 3}


def test_a_hook_hands_the_conversation_to_a_person(chat: Chat, llm: Any, hooks: None) -> None:
    use_hooks(chat, "test_handoff")
    llm.script("assess", assess(response="We ship worldwide."))

    replies = chat.say("Do you ship abroad?")

    assert [r.kind for r in replies] == ["handoff"]
    assert "We ship worldwide." not in [r.text for r in replies]
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert (escalation.reason, escalation.detail) == (
        "policy",
        "a reviewer wants a person to answer",
    )
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == "escalated"
    # staff can still read what the assistant would have said
    assert (
        ReasoningStep.objects.unscoped("test checks the database directly")
        .get(name="hook_handoff")
        .output["draft"]
        == "We ship worldwide."
    )


def test_a_failing_hook_keeps_the_reply_and_is_recorded(chat: Chat, llm: Any, hooks: None) -> None:
    use_hooks(chat, "test_broken", "no_such_hook", "test_polish")
    llm.script("assess", assess(response="We ship worldwide."))

    replies = chat.say("Do you ship abroad?")

    # the broken hook's half-done change is dropped; the next hook works on the intact draft
    assert [r.text for r in replies] == ["We ship worldwide. (checked)"]
    failed = list(
        ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="hook")
        .exclude(error="")
        .order_by("index")
    )
    assert [(s.input_summary, s.error) for s in failed] == [
        ("test_broken", "RuntimeError: the checker crashed"),
        ("no_such_hook", "LookupError: no post-draft hook named 'no_such_hook' is registered"),
    ]
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_the_shipped_low_confidence_hook_hands_over_an_unsure_draft(chat: Chat, llm: Any) -> None:
    use_hooks(chat, "handoff_when_unsure")
    llm.script("assess", assess(response="Maybe?", confidence=3))
    llm.script("critique", {"decision": "PROCEED", "reasoning": "fine", "message": ""})

    replies = chat.say("Is the blue tent waterproof?")

    assert [r.kind for r in replies] == ["handoff"]
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason
        == "low_confidence"
    )


def test_plan_admin_lets_an_operator_pick_hooks(client: Any, hooks: None) -> None:
    client.force_login(UserFactory(is_superuser=True))
    plan = PlanFactory()
    url = reverse("admin:clients_plan_change", args=[plan.pk])
    page = client.get(url).content.decode()
    assert 'name="post_draft_hooks" value="test_handoff"' in page
    assert 'name="post_draft_hooks" value="handoff_when_unsure"' in page

    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k != "post_draft_hooks"}
    data["post_draft_hooks"] = ["test_polish", "test_handoff"]
    response = client.post(url, data)

    assert response.status_code == 302, response.content.decode()[:2000]
    plan.refresh_from_db()
    assert plan.post_draft_hooks == ["test_polish", "test_handoff"]
