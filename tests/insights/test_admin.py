"""The proposals admin: evidence links, approve / reject with the one permission rule, and no
tenant ever seeing or deciding another's proposals."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.insights.models import InsightProposal, ProposalStatus
from apps.insights.services import generate_insights
from apps.knowledge.selectors import business_info_for, faqs_for
from tests.factories import MembershipFactory
from tests.insights.conftest import escalated, ref, window
from tests.insights.test_insights import ANSWER, NORWAY, norway_topic
from tests.support.shop import make_shop

pytestmark = pytest.mark.django_db


def change_url(proposal: InsightProposal) -> str:
    return reverse("admin:insights_insightproposal_change", args=[proposal.pk])


LIST_URL = "/admin/insights/insightproposal/"


def propose(llm: Any, client: Any) -> tuple[InsightProposal, list[Any]]:
    convs = [escalated(client, text) for text in NORWAY]
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    [proposal] = generate_insights(client=client, since=window()[0], until=window()[1]).proposals
    return proposal, convs


@pytest.fixture
def two_shops(db, webhook, llm) -> dict[str, Any]:
    acme = make_shop("adaptive", webhook.url(), slug="acme-shop")
    globex = make_shop("standard", webhook.url(), slug="globex-shop")
    acme.name, globex.name = "Acme Outdoor", "Globex Gear"
    acme.save()
    globex.save()
    mine, convs = propose(llm, acme)
    theirs, _ = propose(llm, globex)
    users = {
        role: MembershipFactory(client=acme, role=role).user
        for role in (Role.VIEWER, Role.AGENT, Role.ADMIN)
    }
    outsider = MembershipFactory(client=globex, role=Role.OWNER).user
    # Every Django model permission: only the membership role stands between staff and data.
    everything = list(Permission.objects.all())
    for user in [*users.values(), outsider]:
        user.user_permissions.add(*everything)
    return {
        "acme": acme,
        "globex": globex,
        "mine": mine,
        "theirs": theirs,
        "convs": convs,
        "users": users,
        "outsider": outsider,
    }


def test_the_detail_page_shows_the_evidence_and_review_buttons(client, two_shops):
    client.force_login(two_shops["users"][Role.ADMIN])
    page = client.get(change_url(two_shops["mine"])).content.decode()
    for conv in two_shops["convs"]:
        link = reverse("admin:conversations_conversation_change", args=[conv.pk])
        assert link in page
    assert 'name="_approve"' in page and 'name="_reject"' in page
    assert "Do you ship to Norway?" in page and ANSWER in page


def test_save_and_approve_adds_the_edited_faq(client, two_shops):
    acme, proposal = two_shops["acme"], two_shops["mine"]
    client.force_login(two_shops["users"][Role.ADMIN])
    edited = "Yes, in 5–7 working days."
    response = client.post(
        change_url(proposal),
        {"question": "Do you ship to Norway?", "answer": edited, "_approve": "1"},
        follow=True,
    )
    assert response.status_code == 200
    proposal.refresh_from_db()
    acme.refresh_from_db()
    assert proposal.status == ProposalStatus.APPROVED
    assert proposal.reviewed_by == two_shops["users"][Role.ADMIN]
    # An FAQ article now, which the business info document lists among its FAQs.
    assert {"question": "Do you ship to Norway?", "answer": edited} in faqs_for(client=acme)
    assert {"question": "Do you ship to Norway?", "answer": edited} in business_info_for(acme)[
        "faqs"
    ]
    assert 'name="_approve"' not in response.content.decode()


def test_an_invalid_faq_shows_a_clear_error_and_changes_nothing(client, two_shops):
    acme, proposal = two_shops["acme"], two_shops["mine"]
    before = dict(acme.business_info)
    client.force_login(two_shops["users"][Role.ADMIN])
    response = client.post(
        change_url(proposal),
        {"question": "Do you ship to Norway?", "answer": "In [days] days.", "_approve": "1"},
        follow=True,
    )
    body = response.content.decode()
    assert "placeholder" in body and "write the answer before approving" in body
    proposal.refresh_from_db()
    acme.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING_REVIEW and acme.business_info == before


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT])
def test_viewers_and_agents_see_but_cannot_decide(client, two_shops, role):
    proposal = two_shops["mine"]
    client.force_login(two_shops["users"][role])
    page = client.get(change_url(proposal))
    assert page.status_code == 200 and 'name="_approve"' not in page.content.decode()
    client.post(change_url(proposal), {"answer": "changed", "_approve": "1"})
    client.post(LIST_URL, {"action": "approve_selected", "_selected_action": [proposal.pk]})
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING_REVIEW and proposal.answer == ANSWER


def test_another_tenant_never_sees_or_decides_a_proposal(client, two_shops):
    acme, mine, theirs = two_shops["acme"], two_shops["mine"], two_shops["theirs"]
    before = dict(acme.business_info)
    client.force_login(two_shops["outsider"])  # the owner of the other shop

    listing = client.get(LIST_URL).content.decode()
    assert change_url(theirs) in listing and change_url(mine) not in listing
    assert client.get(change_url(mine)).status_code in {302, 404}
    for action in ("approve_selected", "reject_selected"):
        response = client.post(
            LIST_URL, {"action": action, "_selected_action": [mine.pk], "post": "yes"}
        )
        assert response.status_code in {200, 302, 403}
    client.post(change_url(mine), {"answer": "hijacked", "_approve": "1"})
    mine.refresh_from_db()
    acme.refresh_from_db()
    assert mine.status == ProposalStatus.PENDING_REVIEW and mine.answer == ANSWER
    assert acme.business_info == before
    # The run list is scoped the same way.
    runs = client.get("/admin/insights/insightrun/").content.decode()
    assert "Acme Outdoor" not in runs and "Globex Gear" in runs
