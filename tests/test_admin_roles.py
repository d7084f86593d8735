"""The admin enforces the one permission rule (apps/api/permissions.py) for every page and
every action: each registered admin's list, add and change page and each of its actions, visited
by a viewer, an agent and an admin of the tenant, by an admin of another tenant and by a platform
superuser. Client staff are given every Django model permission — the worst case an operator
could hand out — so only the membership role stands between them and the data.

The expectations below are the rule written out per model; a model registered in the admin
without a line here fails the test."""

from __future__ import annotations

import json
import re
import uuid
from datetime import date
from typing import Any

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.forms.models import model_to_dict
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from apps.accounts.models import ApiKey, Membership, Role
from apps.accounts.services import api_key_issue
from apps.api.admin import SuperuserOnlyAdmin, TenantScopedAdmin
from apps.approvals.models import ApprovalRequest
from apps.billing.models import (
    DailyUsage,
    UsageAlert,
    UsageCounter,
    UsageRecord,
    VisitorUsage,
)
from apps.escalations.models import Escalation, EscalationStatus, ReplyTemplate
from apps.events.models import EventDelivery
from apps.events.services import subscription_create
from apps.flags.models import MessageFlag
from apps.identity.models import EmailCodeChallenge, EmailCodeSetting
from apps.insights.models import InsightProposal, InsightRun, ProposalKind
from apps.knowledge.services.articles import article_create, source_create
from apps.notes.services import note_add
from apps.privacy.models import DataSubjectRequest
from apps.simulations.models import SimCase, SimulationRun
from apps.tools.models import ClientTool, ExecutorType, McpServer, PendingAction, ToolKind
from tests.api.conftest import make_tenant_data
from tests.factories import (
    ClientFactory,
    ClientToolFactory,
    MembershipFactory,
    ModelPriceFactory,
    PlanFactory,
    UserFactory,
)
from tests.mail.staff_data import make_channel, make_thread

pytestmark = pytest.mark.django_db

VIEWER, AGENT, ADMIN, OUTSIDER, SUPERUSER = "viewer", "agent", "admin", "outsider", "superuser"
ROLES = [VIEWER, AGENT, ADMIN, OUTSIDER, SUPERUSER]
RANK = {VIEWER: 0, AGENT: 1, ADMIN: 2}

# Who may do what, per model: the minimum tenant role (viewer/agent/admin), "platform" for
# platform superusers only, "never" when nobody may (audit rows are written by the product).
PLATFORM, NEVER = "platform", "never"


def rule(view: str, write: str = NEVER) -> dict[str, str]:
    """Viewed by `view` and up; added, changed and deleted by `write` and up (by default nobody:
    the product writes the rows)."""
    return {"view": view, "add": write, "change": write, "delete": write}


RULES: dict[str, dict[str, str]] = {
    "accounts.user": rule(PLATFORM, PLATFORM),
    "accounts.membership": rule(VIEWER, PLATFORM),
    "accounts.apikey": rule(ADMIN, ADMIN),
    "clients.plan": rule(PLATFORM, PLATFORM),
    "clients.rubric": rule(PLATFORM, PLATFORM),
    "clients.client": {"view": VIEWER, "add": PLATFORM, "change": ADMIN, "delete": PLATFORM},
    "billing.modelprice": rule(PLATFORM, PLATFORM),
    "billing.usagerecord": rule(ADMIN),
    "billing.dailyusage": rule(ADMIN),
    "billing.usagealert": rule(ADMIN),
    "billing.usagecounter": rule(ADMIN),
    "billing.visitorusage": rule(ADMIN),
    "billing.clientusage": rule(ADMIN),
    # Outcomes are read by every member (the money figures only by admins, on the page).
    "outcomes.clientoutcomes": rule(VIEWER),
    "conversations.conversation": rule(VIEWER),
    "tools.clienttool": rule(ADMIN, ADMIN),
    # An MCP server's tools are tools: configuration (admins), and its token is write-only.
    "tools.mcpserver": rule(ADMIN, ADMIN),
    # An e-mail channel receives and sends mail for the client, with its provider's secret or
    # mailbox password: configuration (admins). The e-mails are the conversations' record,
    # read like conversations, written by the product only.
    "mail.mailchannel": rule(ADMIN, ADMIN),
    "mail.mailmessage": rule(VIEWER),
    "tools.pendingaction": rule(VIEWER),
    "approvals.approvalrequest": rule(VIEWER),
    "tools.toolexecution": rule(VIEWER),
    "escalations.escalation": rule(VIEWER),
    # Reply templates are the team's shared words: admins write them, everyone uses them. Flags
    # are made in the console and the API; the admin lists them for the record.
    "escalations.replytemplate": rule(VIEWER, ADMIN),
    "flags.messageflag": rule(VIEWER),
    "reasoning.reasoningtrace": rule(VIEWER),
    # Approving a proposal changes the client's business info (MANAGE); the trail stays.
    "insights.insightproposal": {"view": VIEWER, "add": NEVER, "change": ADMIN, "delete": NEVER},
    "insights.insightrun": rule(VIEWER),
    "notes.note": rule(VIEWER, AGENT),
    "privacy.datasubjectrequest": rule(ADMIN),
    # Event subscriptions send conversations to another system: configuration (admins); the
    # delivery log is written by the product, and only admins resend.
    "events.eventsubscription": rule(ADMIN, ADMIN),
    "events.eventdelivery": rule(ADMIN),
    # The e-mail code decides who may act for a customer: configuration (admins); the codes
    # sent are an audit trail of addresses (admins read it, the product writes it).
    "identity.emailcodesetting": rule(ADMIN, ADMIN),
    "identity.emailcodechallenge": rule(ADMIN),
    # Test cases are edited and runs started by agents, as in the playground; a run is written
    # by the engine only (its page is the report).
    "simulations.simcase": rule(VIEWER, AGENT),
    "simulations.simulationrun": {"view": VIEWER, "add": AGENT, "change": NEVER, "delete": NEVER},
    # Knowledge content is written by agents, as notes are; sources make the server fetch
    # addresses on a schedule, so they are configuration (admins).
    "knowledge.article": rule(VIEWER, AGENT),
    "knowledge.faq": rule(VIEWER, AGENT),
    # Knowledge sources feed what reaches prompts: admins add, change and sync them.
    "knowledge.knowledgesource": rule(VIEWER, ADMIN),
    # Third-party admins hold platform-wide rows.
    "auth.group": rule(PLATFORM, PLATFORM),
    # An authenticator is set up by its user through allauth; an operator may only remove one.
    "mfa.authenticator": {"view": PLATFORM, "add": NEVER, "change": NEVER, "delete": PLATFORM},
    **{
        f"django_celery_beat.{name}": rule(PLATFORM, PLATFORM)
        for name in [
            "periodictask",
            "clockedschedule",
            "crontabschedule",
            "solarschedule",
            "intervalschedule",
        ]
    },
}
# Admin actions beyond "delete_selected" (which follows the delete rule).
ACTION_RULES = {
    ("escalations.escalation", "resolve_and_hand_back"): AGENT,
    ("accounts.apikey", "revoke"): ADMIN,
    ("insights.insightproposal", "approve_selected"): ADMIN,
    ("insights.insightproposal", "reject_selected"): ADMIN,
    ("insights.insightproposal", "draft_article_selected"): ADMIN,
    ("notes.note", "approve"): AGENT,
    ("notes.note", "archive"): AGENT,
    ("notes.note", "reject"): AGENT,
    ("simulations.simcase", "run_selected"): AGENT,
    **{
        (model, action): AGENT
        for model in ("knowledge.article", "knowledge.faq")
        for action in ("enable", "disable", "publish")
    },
    ("knowledge.knowledgesource", "sync_now"): ADMIN,
    ("events.eventdelivery", "resend"): ADMIN,
    ("tools.mcpserver", "list_tools"): ADMIN,
    ("django_celery_beat.periodictask", "enable_tasks"): PLATFORM,
    ("django_celery_beat.periodictask", "disable_tasks"): PLATFORM,
    ("django_celery_beat.periodictask", "toggle_tasks"): PLATFORM,
    ("django_celery_beat.periodictask", "run_tasks"): PLATFORM,
}


def allowed(role: str, need: str) -> bool:
    if need == NEVER:
        return False
    if role == SUPERUSER:
        return True
    if role == OUTSIDER or need == PLATFORM:
        return False  # the outsider is an admin, but of another tenant
    return RANK[role] >= RANK[need]


def label(model: type[Any]) -> str:
    return model._meta.label_lower


def url(model: type[Any], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def world(db, settings, tmp_path) -> dict[str, Any]:
    """Two tenants with a row of every kind in the first, and one user per role."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    plan = PlanFactory()
    ModelPriceFactory()
    acme = ClientFactory(plan=plan, name="Acme Shop")
    globex = ClientFactory(plan=plan, name="Globex Shop")
    data = make_tenant_data(acme)
    make_tenant_data(globex)
    # A viewer-role key: an admin may manage it (an owner key only an owner may).
    key, secret = api_key_issue(client=acme, name="erp", role=Role.VIEWER)
    PendingAction.objects.create(
        client=acme,
        conversation=data.conversation,
        tool=data.tool,
        params={"order_id": "TH-12345"},
        params_hash="x" * 64,
        proposed_in=data.trace.user_message,
        expires_at=data.trace.created_at,
        idempotency_key="pa-1",
    )
    ApprovalRequest.objects.create(
        client=acme,
        conversation=data.conversation,
        tool=data.tool,
        params={"order_id": "TH-12345"},
        params_hash="x" * 64,
        idempotency_key="approval-1",
        requested_in=data.trace.user_message,
        expires_at=data.trace.created_at,
    )
    month = date.today().replace(day=1)
    UsageRecord.objects.create(client=acme, mode="adaptive", step="assess", model="gpt-4o-mini")
    DailyUsage.objects.create(client=acme, day=date.today(), grain="total", mode="adaptive")
    UsageAlert.objects.create(
        client=acme, month=month, threshold=80, metric="tokens", used=8, budget=10
    )
    UsageCounter.objects.create(client=acme, month=month, tokens_used=5)
    VisitorUsage.objects.create(client=acme, day=date.today(), visitor="ab" * 16, tokens_used=5)
    run = InsightRun.objects.create(
        client=acme, window_start=data.trace.created_at, window_end=data.trace.created_at
    )
    proposal_fields = {
        "client": acme,
        "run": run,
        "kind": ProposalKind.FAQ,
        "count": 2,
        "conversation_ids": [str(data.conversation.public_id)],
        "question": "Can I pay by bank transfer?",
        "answer": "Yes, within 14 days.",
    }
    InsightProposal.objects.create(title="Shipping", topic_key="shipping", **proposal_fields)
    spare_proposal = InsightProposal.objects.create(
        title="Abroad", topic_key="abroad", **proposal_fields
    )
    # A missing-article proposal: drafting its article links a draft to it.
    gap_proposal = InsightProposal.objects.create(
        title="Kayak rentals",
        topic_key="kayak rentals",
        **(proposal_fields | {"kind": ProposalKind.ARTICLE, "outline": "We rent [what]."}),
    )
    SimCase.objects.create(client=acme, name="greeting", turns=[{"customer": "Hi", "expect": {}}])
    ReplyTemplate.objects.create(client=acme, name="Thanks", shortcut="thanks", body="Thanks!")
    reply = data.conversation.messages.filter(role="assistant", visibility="visible").first()
    MessageFlag.objects.create(
        client=acme, conversation=data.conversation, message=reply, reason="wrong"
    )
    DataSubjectRequest.objects.create(
        client=acme, kind="erase", match_kind="email", channel="api", keep_until=date.today()
    )
    SimulationRun.objects.create(client=acme, name="A run", total=2, completed=1)
    subscription = subscription_create(
        client=acme, url="https://127.0.0.1:9/hook", event_types=["conversation.created"]
    )
    mcp = McpServer.objects.create(
        client=acme, name="crm", url="https://127.0.0.1:9/mcp", bearer_token="mcp-token-secret-1"
    )
    # E-mail: a channel with no mail first (the one deleted), then a thread on another.
    empty_channel = make_channel(acme, address="spare@acme.example", webhook_secret="mg-spare-1")
    mail_thread = make_thread(
        acme,
        channel=make_channel(
            acme,
            inbound_via="imap",
            webhook_secret="",
            imap_host="imap.acme.example",
            imap_username="support",
            imap_password="imap-password-secret-1",
        ),
    )
    EventDelivery.objects.create(
        client=acme,
        subscription=subscription,
        event_id=uuid.uuid4(),
        event_type="conversation.created",
        status="delivered",
        attempts=1,
    )
    EmailCodeSetting.objects.create(
        client=acme, tool_name="order_status", email_field="customer.email", id_field=""
    )
    EmailCodeChallenge.objects.create(
        client=acme,
        conversation=data.conversation,
        email="jane@example.com",
        tool_name="order_status",
        code_hash="0" * 64,
        expires_at=timezone.now(),
    )
    # Knowledge: an article and an FAQ, switched off drafts (so switching on, off and
    # publishing each change them), and a source.
    off_draft = {"status": "draft", "enabled": False}
    article_create(client=acme, data={"title": "Returns", "body": "30 days.", **off_draft})
    article_create(
        client=acme, data={"kind": "faq", "title": "Hours?", "body": "9-5.", **off_draft}
    )
    source_create(client=acme, data={"name": "Help", "kind": "url", "url": "https://a.example"})
    # An AI proposal waiting for review: approve, archive and reject each change it in turn.
    for tenant in (acme, globex):
        note_add(client=tenant, type="pattern", content="Customers say hi.", source="ai")

    everything = list(Permission.objects.all())
    users: dict[str, Any] = {}
    for role in [VIEWER, AGENT, ADMIN]:
        users[role] = MembershipFactory(client=acme, role=role).user
    users[OUTSIDER] = MembershipFactory(client=globex, role=Role.ADMIN).user
    for user in users.values():
        user.user_permissions.add(*everything)
    users[SUPERUSER] = UserFactory(is_superuser=True)

    # Platform rows, so every admin has a change page to visit.
    Group.objects.create(name="support")
    EmailAddress.objects.create(user=users[VIEWER], email=users[VIEWER].email)
    totp_secret = generate_totp_secret()
    TOTP.activate(users[SUPERUSER], totp_secret)
    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(
        name="sweep", task="apps.billing.tasks.noop", interval=every, enabled=False
    )
    ClockedSchedule.objects.create(clocked_time=data.trace.created_at)
    CrontabSchedule.objects.create()
    SolarSchedule.objects.create(event="sunrise", latitude=1, longitude=1)
    return {
        # Rows nothing else refers to, for deleting (audit rows protect the others).
        "spare_plan": PlanFactory(),
        "spare_client": ClientFactory(plan=plan),
        "spare_tool": ClientToolFactory(client=acme, name="spare_tool"),
        "spare_proposal": spare_proposal,
        "gap_proposal": gap_proposal,
        "acme": acme,
        "globex": globex,
        "data": data,
        "users": users,
        "secrets": [
            secret,
            key.secret_hash,
            totp_secret,
            users[VIEWER].password,
            subscription.secret,
            mcp.bearer_token,
            empty_channel.webhook_secret,
            mail_thread.channel.imap_password,
        ],
    }


def row_of(model: type[Any], world: dict[str, Any]) -> Any:
    """A row of `model` belonging to the first tenant (or a platform row)."""
    acme = world["acme"]
    if label(model) in {"clients.client", "billing.clientusage", "outcomes.clientoutcomes"}:
        return model.objects.get(pk=acme.pk)
    if label(model) == "clients.plan":
        return world["spare_plan"]
    if label(model) == "accounts.user":
        return world["users"][VIEWER]
    if any(f.name == "client" for f in model._meta.fields):
        return model.objects.filter(client=acme).order_by("pk").first()
    return model.objects.order_by("pk").first()


def snapshot(obj: Any) -> dict[str, Any] | None:
    fresh = type(obj)._base_manager.filter(pk=obj.pk).first()  # any model, any client
    return None if fresh is None else model_to_dict(fresh)


def test_every_registered_admin_is_covered_and_guarded():
    registered = {label(model): model_admin for model, model_admin in admin.site._registry.items()}
    assert set(registered) == set(RULES)
    for name, model_admin in registered.items():
        assert isinstance(model_admin, TenantScopedAdmin | SuperuserOnlyAdmin), name


@pytest.mark.parametrize("role", ROLES)
def test_every_admin_page_follows_the_rule(client, world, role):
    client.force_login(world["users"][role])
    problems: list[str] = []
    bodies: list[str] = []
    for model in admin.site._registry:
        rules = RULES[label(model)]
        obj = row_of(model, world)
        assert obj is not None, label(model)
        pages = [
            ("view", url(model, "changelist")),
            ("add", url(model, "add")),
            ("view", url(model, "change", obj.pk)),
        ]
        if label(model) == "billing.clientusage":  # its "change" page is the usage chart
            pages[2] = ("view", reverse("admin:billing_client_usage", args=[obj.pk]))
        if label(model) == "outcomes.clientoutcomes":  # likewise the outcomes page
            pages[2] = ("view", reverse("admin:outcomes_client_outcomes", args=[obj.pk]))
        pages.append(("delete", url(model, "delete", obj.pk)))
        for index, (need_of, page) in enumerate(pages):
            response = client.get(page)
            expected = allowed(role, rules[need_of])
            if role == OUTSIDER and index < 2:
                # List and add pages serve the outsider's own tenant (they are its admin)...
                expected = allowed(ADMIN, rules[need_of])
                if response.status_code == 200 and index == 0:
                    # ...and never show the first tenant's rows.
                    assert "Acme Shop" not in response.content.decode(), page
            got = response.status_code == 200
            if got != expected:
                problems.append(f"{page}: {response.status_code}, expected allowed={expected}")
            if response.status_code == 200:
                bodies.append(response.content.decode())
            else:
                assert response.status_code in {302, 403, 404}, (page, response.status_code)
        # The change page offers saving exactly when the rule allows changing.
        change_page = client.get(url(model, "change", obj.pk))
        if change_page.status_code == 200 and label(model) not in {
            "billing.clientusage",
            "outcomes.clientoutcomes",
        }:
            can_save = 'name="_save"' in change_page.content.decode()
            if can_save != allowed(role, rules["change"]):
                problems.append(f"{label(model)} change page: save button={can_save}")
    assert not problems, "\n".join(problems)
    # Nothing secret ever reaches a page: API key secrets and hashes, TOTP secrets, passwords.
    for body in bodies:
        for secret in world["secrets"]:
            assert secret not in body


# Deleted last, in this order: deleting a client (or a user) takes other rows with it.
DELETED_LAST = [
    "events.eventsubscription",  # takes its deliveries with it
    "billing.clientusage",
    "outcomes.clientoutcomes",
    "clients.client",
    "accounts.user",
]


@pytest.mark.parametrize("role", ROLES)
def test_every_admin_action_follows_the_rule(client, world, role):
    client.force_login(world["users"][role])
    operator = type("Request", (), {"user": world["users"][SUPERUSER], "GET": {}})()
    runs: list[tuple[type[Any], str, str]] = []
    for model, model_admin in admin.site._registry.items():
        # Every action the admin defines (a superuser is offered all of them).
        for action in model_admin.get_actions(operator):
            if action == "delete_selected":
                continue
            runs.append((model, action, ACTION_RULES[(label(model), action)]))
    models = sorted(
        admin.site._registry,
        key=lambda m: DELETED_LAST.index(label(m)) + 1 if label(m) in DELETED_LAST else 0,
    )
    runs += [(model, "delete_selected", RULES[label(model)]["delete"]) for model in models]
    assert {(label(m), a) for m, a, _ in runs if a != "delete_selected"} == set(ACTION_RULES)

    problems: list[str] = []
    for model, action, need in runs:
        if action == "run_tasks" and role == SUPERUSER:
            continue  # would publish to the Celery broker; staff refusal is still checked
        obj = row_of(model, world)
        if action == "delete_selected" and label(model) == "clients.client":
            obj = world["spare_client"]
        if action == "delete_selected" and label(model) == "tools.clienttool":
            obj = world["spare_tool"]
        if action == "reject_selected":
            obj = world["spare_proposal"]  # the other row is approved by then
        if action == "draft_article_selected":
            obj = world["gap_proposal"]
        assert obj is not None, (label(model), action)
        before = snapshot(obj)
        data = {"action": action, "_selected_action": [obj.pk], "post": "yes"}
        response = client.post(url(model, "changelist"), data)
        assert response.status_code in {200, 302, 403}, (label(model), action)
        if action == "run_selected":  # changes nothing: it opens the New simulation form
            opened = response.status_code == 302 and "/simulationrun/add/" in response["Location"]
            if opened != allowed(role, need):
                problems.append(f"{label(model)}.{action}: {response.status_code}")
            continue
        changed = snapshot(obj) != before
        if changed != allowed(role, need):
            problems.append(f"{label(model)}.{action}: {response.status_code}, changed={changed}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# The two reported attacks, and saving forms with each role.
# ---------------------------------------------------------------------------------------------


def test_a_viewer_cannot_resolve_an_escalation_through_the_admin(client, world):
    """Regression: the admin action only asked for Django's change permission."""
    escalation = world["data"].escalation
    client.force_login(world["users"][VIEWER])
    response = client.post(
        url(Escalation, "changelist"),
        {"action": "resolve_and_hand_back", "_selected_action": [escalation.pk]},
    )
    assert response.status_code in {200, 302, 403}
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.OPEN
    assert escalation.resolved_by is None


def test_an_agent_resolves_an_escalation_through_the_admin(client, world):
    escalation = world["data"].escalation
    agent = world["users"][AGENT]
    client.force_login(agent)
    client.post(
        url(Escalation, "changelist"),
        {"action": "resolve_and_hand_back", "_selected_action": [escalation.pk]},
    )
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.RESOLVED
    assert escalation.resolved_by == agent


def tool_form(tool: ClientTool, **changes: Any) -> dict[str, Any]:
    """The tool form as the change page posts it (a built-in tool: no secret involved)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "kind": tool.kind,
        "enabled": "on" if tool.enabled else "",
        "parameters": '{"type": "object"}',
        "executor_type": tool.executor_type,
        "webhook_url": "",
        "timeout_seconds": "2",
        "max_retries": "0",
        "builtin_handler": tool.builtin_handler,
        "result_template": "",
        **changes,
    }


@pytest.fixture
def destructive_tool(world) -> ClientTool:
    return ClientToolFactory(
        client=world["acme"],
        name="cancel_order",
        kind=ToolKind.DESTRUCTIVE,
        executor_type=ExecutorType.BUILTIN,
        builtin_handler="demo.cancel_order",
        webhook_url="",
        signing_secret="",
    )


@pytest.mark.parametrize(
    ("role", "may"),
    [(VIEWER, False), (AGENT, False), (OUTSIDER, False), (ADMIN, True), (SUPERUSER, True)],
)
def test_changing_a_tools_kind_needs_the_admin_role(client, world, destructive_tool, role, may):
    """Regression: a viewer turned a destructive tool into a read tool (no confirmation)."""
    client.force_login(world["users"][role])
    response = client.post(
        url(ClientTool, "change", destructive_tool.pk),
        tool_form(destructive_tool, kind=ToolKind.READ),
    )
    destructive_tool.refresh_from_db()
    if may:
        assert response.status_code == 302, response.content.decode()[:2000]
        assert destructive_tool.kind == ToolKind.READ
    else:
        assert response.status_code in {302, 403}
        assert destructive_tool.kind == ToolKind.DESTRUCTIVE


@pytest.mark.parametrize(
    ("role", "may"),
    [(VIEWER, False), (AGENT, False), (OUTSIDER, False), (ADMIN, True), (SUPERUSER, True)],
)
def test_adding_and_deleting_tools_needs_the_admin_role(client, world, destructive_tool, role, may):
    client.force_login(world["users"][role])
    form = tool_form(destructive_tool, name="new_tool", client=world["acme"].pk)
    client.post(url(ClientTool, "add"), form)
    assert (
        ClientTool.objects.unscoped("test checks the database directly")
        .filter(name="new_tool")
        .exists()
        is may
    )
    client.post(url(ClientTool, "delete", destructive_tool.pk), {"post": "yes"})
    assert (
        ClientTool.objects.unscoped("test checks the database directly")
        .filter(pk=destructive_tool.pk)
        .exists()
        is not may
    )


@pytest.mark.parametrize(
    ("role", "may"),
    [(VIEWER, False), (AGENT, False), (OUTSIDER, False), (ADMIN, True), (SUPERUSER, True)],
)
def test_client_settings_need_the_admin_role(client, world, role, may):
    acme = world["acme"]
    client.force_login(world["users"][SUPERUSER])
    page = client.get(url(type(acme), "change", acme.pk)).content.decode()
    form: dict[str, Any] = {
        "name": acme.name,
        "language": acme.language,
        "support_email": acme.support_email,
        "greeting": "Hijacked greeting",
        "remember_conversation_hours": acme.remember_conversation_hours,
        "allowed_origins": json.dumps(acme.allowed_origins),
    }
    for prefix in re.findall(r'name="([\w-]+)-TOTAL_FORMS"', page):
        form |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"}
    if role == SUPERUSER:
        form |= {"slug": acme.slug, "plan": acme.plan_id, "is_active": "on"}
    client.force_login(world["users"][role])
    response = client.post(url(type(acme), "change", acme.pk), form)
    acme.refresh_from_db()
    assert (acme.greeting == "Hijacked greeting") is may, response.status_code


def test_the_tools_inline_on_the_client_page_is_read_only_and_follows_the_rule(client, world):
    acme, tool = world["acme"], world["data"].tool
    client.force_login(world["users"][VIEWER])
    body = client.get(url(type(acme), "change", acme.pk)).content.decode()
    assert tool.name not in body  # tools are configuration: admins and owners see them
    client.force_login(world["users"][ADMIN])
    body = client.get(url(type(acme), "change", acme.pk)).content.decode()
    assert tool.name in body
    # No editable field on the inline: a tool changes on its own page.
    assert not re.search(r'name="[^"]*-(kind|enabled|name)"', body)


@pytest.mark.parametrize(
    ("role", "may"),
    [(VIEWER, False), (AGENT, False), (OUTSIDER, False), (ADMIN, True), (SUPERUSER, True)],
)
def test_api_keys_need_the_admin_role(client, world, role, may):
    acme = world["acme"]
    client.force_login(world["users"][role])
    client.post(url(ApiKey, "add"), {"client": acme.pk, "name": "new", "role": "viewer"})
    assert (
        ApiKey.objects.unscoped("test checks the database directly").filter(name="new").exists()
        is may
    )
    key = ApiKey.objects.unscoped("test checks the database directly").get(name="erp")
    client.post(url(ApiKey, "change", key.pk), {"name": "renamed"})
    key.refresh_from_db()
    assert (key.name == "renamed") is may


def test_an_admin_of_one_client_and_viewer_of_another_acts_only_in_the_first(client, world):
    """An action over rows of two clients is refused as a whole when one is out of reach."""
    globex = world["globex"]
    admin_user = world["users"][ADMIN]
    MembershipFactory(client=globex, user=admin_user, role=Role.VIEWER)
    theirs = Escalation.objects.get(client=globex)
    ours = world["data"].escalation
    client.force_login(admin_user)
    response = client.post(
        url(Escalation, "changelist"),
        {"action": "resolve_and_hand_back", "_selected_action": [ours.pk, theirs.pk]},
    )
    assert response.status_code == 403
    for escalation in [ours, theirs]:
        escalation.refresh_from_db()
        assert escalation.status == EscalationStatus.OPEN
    tool = ClientTool.objects.get(client=globex)
    assert client.get(url(ClientTool, "change", tool.pk)).status_code == 302  # not visible
    assert (
        Membership.objects.unscoped("test checks the database directly")
        .filter(user=admin_user)
        .count()
        == 2
    )


def test_an_admin_writes_a_reply_template_and_a_bad_variable_is_refused(client, world):
    client.force_login(world["users"][ADMIN])
    acme = world["acme"]
    form = {"client": acme.pk, "name": "Shipped", "shortcut": "shipped"}
    refused = client.post(url(ReplyTemplate, "add"), form | {"body": "Your {order} shipped"})
    assert refused.status_code == 200 and "Unknown variable {order}" in refused.content.decode()
    saved = client.post(url(ReplyTemplate, "add"), form | {"body": "Order {order_id} shipped"})
    assert saved.status_code == 302
    template = ReplyTemplate.objects.for_client(acme).get(shortcut="shipped")
    assert template.body == "Order {order_id} shipped"
    taken = client.post(url(ReplyTemplate, "add"), form | {"body": "Again"})
    assert taken.status_code == 200
    assert ReplyTemplate.objects.for_client(acme).filter(shortcut="shipped").count() == 1
