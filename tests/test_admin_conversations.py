"""Admin for support leads: the conversation debug view, tools, audit lists, escalations, traces."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role as AccountRole
from apps.clients import modes
from apps.conversations.admin import (
    ANY_MODE_KINDS,
    KIND_EXPLANATIONS,
    PLAN_SWITCHED_KINDS,
    kinds_that_can_occur,
)
from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Role
from apps.escalations.models import Escalation, EscalationReason, EscalationStatus
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceStatus
from apps.reasoning.modes import mode_that_runs
from apps.tools.models import ClientTool, PendingAction, ToolExecution, ToolKind
from tests.factories import ClientToolFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

SEQ_RE = re.compile(r'data-seq="(\d+)" data-kind="(\w+)" data-visibility="(\w+)"')


def msg(conversation, seq, role, kind, text, *, internal=False, trace=None, data=None):
    return Message.objects.create(
        client=conversation.client,
        conversation=conversation,
        seq=seq,
        role=role,
        kind=kind,
        visibility="internal" if internal else "visible",
        text=text,
        data=data or {},
        trace=trace,
    )


def step(trace, index, name, *, latency, prompt=0, completion=0, error="", output=None):
    return ReasoningStep.objects.create(
        client=trace.client,
        trace=trace,
        index=index,
        name=name,
        latency_ms=latency,
        prompt_tokens=prompt,
        completion_tokens=completion,
        error=error,
        output=output or {},
    )


def trace_for(user_message, **fields):
    return ReasoningTrace.objects.create(
        client=user_message.client,
        conversation=user_message.conversation,
        user_message=user_message,
        mode=fields.pop("mode", "adaptive"),
        status=fields.pop("status", TraceStatus.DONE),
        **fields,
    )


@pytest.fixture
def debug_conversation(client_a):
    """Two turns: an order lookup that ran a tool, then a cancel request that escalated.
    Messages are inserted out of order so the page must sort by seq, not by insertion."""
    conv = Conversation.objects.create(
        client=client_a, visitor_id="visitor-42", status=ConversationStatus.ESCALATED
    )
    ask = msg(conv, 1, Role.USER, Kind.TEXT, "Where is my order TH-12345?")
    cancel = msg(conv, 7, Role.USER, Kind.TEXT, "Cancel it please")
    turn1 = trace_for(
        ask,
        critique_triggered=True,
        critique_reasons=["low_confidence"],
        context_fetched=["policies.shipping"],
        llm_calls=2,
        tool_calls=1,
        prompt_tokens=904,
        completion_tokens=129,
        duration_ms=2345,
    )
    turn2 = trace_for(cancel, escalated=True, llm_calls=1, prompt_tokens=610, completion_tokens=33)
    # inserted in reverse seq order
    msg(conv, 9, Role.SYSTEM, Kind.HANDOFF, "A member of our team will reply shortly.", trace=turn2)
    msg(conv, 8, Role.SYSTEM, Kind.ESCALATION, "Escalated: policy", internal=True, trace=turn2)
    msg(conv, 6, Role.ASSISTANT, Kind.TEXT, "Your order TH-12345 has shipped.", trace=turn1)
    msg(conv, 5, Role.TOOL, Kind.TOOL_RESULT, "status: shipped", internal=True, trace=turn1)
    msg(
        conv,
        4,
        Role.ASSISTANT,
        Kind.TOOL_CALL,
        "get_order_status(order_id=TH-12345)",
        internal=True,
        trace=turn1,
    )
    msg(conv, 3, Role.ASSISTANT, Kind.CRITIQUE, "Decision: PROCEED", internal=True, trace=turn1)
    msg(
        conv,
        2,
        Role.ASSISTANT,
        Kind.ASSESSMENT,
        "Confidence 6/10, plan get_order_status",
        internal=True,
        trace=turn1,
        data={"confidence": 6, "tool_call": "get_order_status", "missing_params": []},
    )
    step(turn1, 0, "assess", latency=812, prompt=604, completion=88, output={"confidence": 6})
    step(turn1, 1, "critique", latency=455, prompt=300, completion=41)
    step(turn1, 2, "tool:get_order_status", latency=120)
    step(turn2, 0, "assess", latency=9001, error="Timeout talking to the model")
    Escalation.objects.create(
        client=client_a,
        conversation=conv,
        reason=EscalationReason.CUSTOMER_REQUEST,
        detail="Wants to cancel a shipped order",
        trace=turn2,
    )
    Conversation.objects.unscoped("test checks the database directly").filter(pk=conv.pk).update(
        last_seq=9, last_message_at=timezone.now()
    )
    return conv


def change_url(conversation):
    return reverse("admin:conversations_conversation_change", args=[conversation.pk])


# --- conversation debug view ------------------------------------------------------------------


def test_debug_view_interleaves_visible_and_internal_messages_in_seq_order(
    admin_client, debug_conversation
):
    response = admin_client.get(change_url(debug_conversation))
    assert response.status_code == 200
    body = response.content.decode()

    rows = SEQ_RE.findall(body)
    assert [int(seq) for seq, _, _ in rows] == list(range(1, 10))
    assert [vis for _, _, vis in rows] == [
        "visible",
        "internal",
        "internal",
        "internal",
        "internal",
        "visible",
        "visible",
        "internal",
        "visible",
    ]
    texts = [
        "Where is my order TH-12345?",
        "Confidence 6/10, plan get_order_status",
        "Decision: PROCEED",
        "get_order_status(order_id=TH-12345)",
        "status: shipped",
        "Your order TH-12345 has shipped.",
        "Cancel it please",
        "Escalated: policy",
        "A member of our team will reply shortly.",
    ]
    timeline = body[body.index('id="conversation"') :]
    positions = [timeline.index(text) for text in texts]
    assert positions == sorted(positions)
    # internal messages are marked as such, visible ones are not
    assert body.count('class="gd-msg gd-msg-internal"') == 5
    assert body.count('gd-internal-label">internal</span>') == 5
    # kind and role badges
    assert '<span class="gd-badge gd-kind-critique">Critique</span>' in body
    assert '<span class="gd-badge gd-role-tool">Tool</span>' in body
    # data as pretty JSON inside a collapsible block
    assert '<details class="gd-json">' in body
    # pretty-printed: one key per indented line (key order is the database's: jsonb sorts)
    assert "\n  &quot;confidence&quot;: 6," in body


def legend_kinds(body: str) -> set[str]:
    legend = body[body.index('id="legend"') : body.index("</details>", body.index('id="legend"'))]
    return set(re.findall(r'gd-badge gd-kind-(\w+)">', legend))


ANY_MODE = {
    "text",
    "confirmation_request",
    "handoff",
    "notice",
    "guard",
    "tool_call",
    "tool_result",
    "escalation",
}


def test_every_kind_has_an_explanation_and_a_mode_or_switch_or_is_never_written():
    assert set(KIND_EXPLANATIONS) == set(Kind.values)
    placed = set(ANY_MODE_KINDS) | set(PLAN_SWITCHED_KINDS)
    for mode in modes.modes():  # every registered mode declares the kinds it writes
        placed |= set(mode.message_kinds)
    # Nothing writes an error message; staff notes come from people, not turns (the legend
    # shows them where a conversation holds one).
    assert set(Kind.values) - placed == {"error", "staff_note"}


def test_debug_view_legend_explains_the_adaptive_kinds(admin_client, debug_conversation):
    body = admin_client.get(change_url(debug_conversation)).content.decode()
    assert legend_kinds(body) == ANY_MODE | {"assessment", "context_fetch", "critique"}
    legend = body[body.index('id="legend"') : body.index("</details>", body.index('id="legend"'))]
    for words in ["PROCEED", "ASK_USER", "ESCALATE", "safety rule enforced in code", "confident"]:
        assert words in legend
    assert "adaptive mode" in legend
    # the legend comes before the conversation
    assert body.index('id="legend"') < body.index('id="conversation"')


def test_a_standard_conversation_has_no_adaptive_kinds_in_its_legend(admin_client, client_a):
    client_a.plan.ai_mode = "standard"
    client_a.plan.save()
    conv = Conversation.objects.create(client=client_a)
    question = msg(conv, 1, Role.USER, Kind.TEXT, "Hi")
    trace_for(question, mode="standard")
    body = admin_client.get(change_url(conv)).content.decode()
    assert legend_kinds(body) == ANY_MODE
    assert "standard mode" in body

    # a kind the conversation does hold is always explained (here: from before a plan change)
    msg(conv, 2, Role.ASSISTANT, Kind.CRITIQUE, "PROCEED", internal=True)
    assert legend_kinds(admin_client.get(change_url(conv)).content.decode()) == ANY_MODE | {
        "critique"
    }


def test_a_deliberative_plan_lists_the_kinds_of_the_mode_that_runs(admin_client, client_a):
    client_a.plan.ai_mode = "deliberative"
    client_a.plan.save()
    conv = Conversation.objects.create(client=client_a)
    kinds = legend_kinds(admin_client.get(change_url(conv)).content.decode())
    assert kinds >= ANY_MODE | {"assessment", "critique"}
    # reasoning steps, feedback and refinement appear exactly when the deliberative mode runs
    runs = mode_that_runs("deliberative")
    assert ({"reasoning_step", "feedback", "refinement"} <= kinds) == (runs == "deliberative")


def test_a_plan_switch_adds_its_kind_in_any_mode(admin_client, client_a):
    client_a.plan.ai_mode = "standard"
    client_a.plan.save()
    conv = Conversation.objects.create(client=client_a)
    assert "evaluation" not in legend_kinds(admin_client.get(change_url(conv)).content.decode())
    assert kinds_that_can_occur(modes={"standard"}, plan=client_a.plan) == ANY_MODE
    client_a.plan.evaluation_enabled = True
    client_a.plan.save()
    assert legend_kinds(admin_client.get(change_url(conv)).content.decode()) == ANY_MODE | {
        "evaluation"
    }


def test_debug_view_shows_its_title_once(admin_client, debug_conversation):
    body = admin_client.get(change_url(debug_conversation)).content.decode()
    assert body.count(str(debug_conversation.public_id)) >= 1
    headings = re.findall(r"<h[12][^>]*>([^<]*)</h[12]>", body)
    titled = [h for h in headings if str(debug_conversation.public_id) in h]
    assert titled == [f"Conversation {debug_conversation.public_id}"]


def test_debug_view_shows_each_turn_with_its_steps(admin_client, debug_conversation):
    body = admin_client.get(change_url(debug_conversation)).content.decode()
    turns = body[body.index('id="turns"') : body.index('id="escalations"')]
    assert "Turn 1 — customer message #1" in turns
    assert "Turn 2 — customer message #7" in turns
    assert "yes — low_confidence" in turns  # critique triggered + reasons
    assert "policies.shipping" in turns  # context fetched
    assert "1033 (904 prompt + 129 completion)" in turns
    assert "2345 ms" in turns

    step_rows = re.findall(r'<tr data-step="(\d+)">(.*?)</tr>', turns, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for _, row in step_rows]
    assert [c[1] for c in cells] == ["assess", "critique", "tool:get_order_status", "assess"]
    assert [c[2:5] for c in cells[:2]] == [["812", "604", "88"], ["455", "300", "41"]]
    assert "Timeout talking to the model" in cells[3][5]
    assert "&quot;confidence&quot;: 6" in cells[0][6]
    # messages link to their turn
    assert 'href="#turn-' in body


def test_debug_view_shows_the_escalation_state(admin_client, debug_conversation):
    body = admin_client.get(change_url(debug_conversation)).content.decode()
    section = body[body.index('id="escalations"') :]
    assert "Customer asked for a human" in section
    assert "Wants to cancel a shipped order" in section
    assert "Open — a human owns the conversation" in section
    assert "A human owns this conversation" in body


def test_debug_view_is_read_only(admin_client, debug_conversation):
    url = change_url(debug_conversation)
    body = admin_client.get(url).content.decode()
    assert 'name="_save"' not in body
    assert 'name="status"' not in body
    response = admin_client.post(url, {"status": "closed"})
    assert response.status_code == 403
    debug_conversation.refresh_from_db()
    assert debug_conversation.status == ConversationStatus.ESCALATED
    add = admin_client.get(reverse("admin:conversations_conversation_add"))
    assert add.status_code == 403


def _conversation_of_size(client, *, turns: int, steps: int) -> Conversation:
    conv = Conversation.objects.create(client=client)
    seq = 0
    for t in range(turns):
        seq += 1
        user = msg(conv, seq, Role.USER, Kind.TEXT, f"question {t}")
        trace = trace_for(user)
        for i in range(steps):
            step(trace, i, "assess", latency=10 + i, prompt=5, completion=5, output={"i": i})
        seq += 1
        msg(conv, seq, Role.ASSISTANT, Kind.ASSESSMENT, "a", internal=True, trace=trace)
        seq += 1
        msg(conv, seq, Role.ASSISTANT, Kind.TEXT, f"answer {t}", trace=trace)
    Escalation.objects.create(client=client, conversation=conv, reason=EscalationReason.POLICY)
    return conv


def test_debug_view_query_count_does_not_grow_with_the_conversation(admin_client, client_a):
    small = _conversation_of_size(client_a, turns=1, steps=1)
    large = _conversation_of_size(client_a, turns=8, steps=6)
    admin_client.get(change_url(small))  # warm up per-process caches (content types, …)
    with CaptureQueriesContext(connection) as small_queries:
        assert admin_client.get(change_url(small)).status_code == 200
    with CaptureQueriesContext(connection) as large_queries:
        response = admin_client.get(change_url(large))
    assert response.status_code == 200
    assert len(SEQ_RE.findall(response.content.decode())) == 24
    assert len(large_queries) == len(small_queries)


# --- conversation changelist ------------------------------------------------------------------


def test_changelist_annotates_message_count_and_open_escalation(
    admin_client, debug_conversation, client_b
):
    quiet = Conversation.objects.create(client=client_b, visitor_id="quiet")
    response = admin_client.get(reverse("admin:conversations_conversation_changelist"))
    assert response.status_code == 200
    rows = {c.pk: c for c in response.context["cl"].result_list}
    assert rows[debug_conversation.pk].message_total == 9
    assert rows[debug_conversation.pk].open_escalation is True
    assert rows[quiet.pk].message_total == 0
    assert rows[quiet.pk].open_escalation is False


def test_changelist_query_count_is_flat(admin_client, client_a):
    url = reverse("admin:conversations_conversation_changelist")
    _conversation_of_size(client_a, turns=1, steps=0)
    admin_client.get(url)
    with CaptureQueriesContext(connection) as few:
        admin_client.get(url)
    for _ in range(5):
        _conversation_of_size(client_a, turns=2, steps=0)
    with CaptureQueriesContext(connection) as many:
        response = admin_client.get(url)
    assert len(response.context["cl"].result_list) == 6
    assert len(many) == len(few)


@pytest.mark.parametrize(
    ("term", "expected"),
    [("visitor-42", True), ("shipped", True), ("no-such-text", False), ("<public_id>", True)],
)
def test_changelist_search(admin_client, debug_conversation, client_a, term, expected):
    other = Conversation.objects.create(client=client_a, visitor_id="someone-else")
    if term == "<public_id>":
        term = str(debug_conversation.public_id)
    response = admin_client.get(reverse("admin:conversations_conversation_changelist"), {"q": term})
    found = {c.pk for c in response.context["cl"].result_list}
    assert (debug_conversation.pk in found) is expected
    assert other.pk not in found


def test_changelist_filters_load(admin_client, debug_conversation):
    url = reverse("admin:conversations_conversation_changelist")
    response = admin_client.get(url, {"status__exact": "escalated"})
    assert [c.pk for c in response.context["cl"].result_list] == [debug_conversation.pk]
    response = admin_client.get(url, {"status__exact": "closed"})
    assert list(response.context["cl"].result_list) == []


def test_client_staff_only_see_their_own_clients_conversations(
    client, client_a, client_b, debug_conversation
):
    staff = UserFactory()
    MembershipFactory(user=staff, client=client_a)
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    theirs = Conversation.objects.create(client=client_b, visitor_id="globex-visitor")
    client.force_login(staff)

    response = client.get(reverse("admin:conversations_conversation_changelist"))
    assert [c.pk for c in response.context["cl"].result_list] == [debug_conversation.pk]
    assert "globex-visitor" not in response.content.decode()
    assert client.get(change_url(debug_conversation)).status_code == 200
    response = client.get(change_url(theirs))
    assert response.status_code == 302  # "doesn't exist", exactly like a missing one
    assert "globex-visitor" not in client.get(response["Location"]).content.decode()


# --- tools ------------------------------------------------------------------------------------


def tool_form(client, **overrides):
    data = {
        "client": client.pk,
        "name": "cancel_order",
        "description": "Cancel an order that has not shipped.",
        "kind": ToolKind.DESTRUCTIVE,
        "enabled": "on",
        "parameters": '{"type": "object", "properties": {"order_id": {"type": "string"}}}',
        "executor_type": "webhook",
        "webhook_url": "https://shop.example/hooks/cancel",
        "signing_secret": "s3cret-value",
        "timeout_seconds": "10",
        "max_retries": "2",
        "builtin_handler": "",
        "result_template": "",
    }
    data.update(overrides)
    return data


def post_tool(admin_client, data):
    response = admin_client.post(reverse("admin:tools_clienttool_add"), data)
    form = response.context["adminform"].form if response.status_code == 200 else None
    return response, form


def test_tool_form_rejects_an_invalid_json_schema(admin_client, client_a):
    response, form = post_tool(admin_client, tool_form(client_a, parameters='{"type": "objekt"}'))
    assert form is not None
    assert "Not a valid JSON Schema" in form.errors["parameters"][0]
    assert "Not a valid JSON Schema" in response.content.decode()
    _, form = post_tool(admin_client, tool_form(client_a, parameters='{"type": "string"}'))
    assert '"type": "object"' in form.errors["parameters"][0]
    assert not ClientTool.objects.unscoped("test checks the database directly").exists()


def test_tool_form_webhook_needs_a_url_and_a_secret(admin_client, client_a):
    _, form = post_tool(admin_client, tool_form(client_a, signing_secret="", webhook_url=""))
    assert form.errors["signing_secret"] == ["A webhook tool needs a signing secret."]
    assert form.errors["webhook_url"] == ["A webhook tool needs the URL to call."]
    assert not ClientTool.objects.unscoped("test checks the database directly").exists()


def test_tool_form_builtin_needs_a_known_handler(admin_client, client_a):
    _, form = post_tool(admin_client, tool_form(client_a, executor_type="builtin", webhook_url=""))
    assert "demo.cancel_order" in form.errors["builtin_handler"][0]
    response, _ = post_tool(
        admin_client,
        tool_form(
            client_a,
            executor_type="builtin",
            webhook_url="",
            signing_secret="",
            builtin_handler="demo.cancel_order",
        ),
    )
    assert response.status_code == 302
    tool = ClientTool.objects.get(client=client_a, name="cancel_order")
    assert tool.builtin_handler == "demo.cancel_order"
    assert tool.is_configured


def test_tool_change_page_pretty_prints_the_schema(admin_client, client_a):
    tool = ClientToolFactory(client=client_a)
    response = admin_client.get(reverse("admin:tools_clienttool_change", args=[tool.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "\n  &quot;type&quot;: &quot;object&quot;," in body
    assert "\n  &quot;properties&quot;: {\n" in body
    for heading in ["What it does", "Parameters (JSON Schema)", "How it runs", "Reply template"]:
        assert heading in body


def test_client_staff_can_only_add_tools_for_their_own_client(client, client_a, client_b):
    staff = UserFactory()
    # (tools are configuration: the admin role manages them, like the tools API)
    MembershipFactory(user=staff, client=client_a, role=AccountRole.ADMIN)
    staff.user_permissions.add(*Permission.objects.filter(codename__endswith="_clienttool"))
    ClientToolFactory(client=client_b, name="globex_tool")
    client.force_login(staff)
    page = client.get(reverse("admin:tools_clienttool_add"))
    choices = [pk for pk, _ in page.context["adminform"].form.fields["client"].choices if pk]
    assert [int(str(pk)) for pk in choices] == [client_a.pk]
    response = client.post(reverse("admin:tools_clienttool_add"), tool_form(client_b))
    assert "client" in response.context["adminform"].form.errors
    listing = client.get(reverse("admin:tools_clienttool_changelist")).content.decode()
    assert "globex_tool" not in listing
    assert not ClientTool.objects.filter(client=client_b, name="cancel_order").exists()


def test_tool_client_is_fixed_once_created(admin_client, client_a, client_b):
    tool = ClientToolFactory(client=client_a)
    body = admin_client.get(
        reverse("admin:tools_clienttool_change", args=[tool.pk])
    ).content.decode()
    assert 'name="client"' not in body


# --- audit lists, escalations, traces ---------------------------------------------------------


@pytest.fixture
def audit_rows(debug_conversation):
    client = debug_conversation.client
    tool = ClientToolFactory(client=client, name="cancel_order", kind=ToolKind.DESTRUCTIVE)
    proposed_in = debug_conversation.messages.get(seq=7)
    action = PendingAction.objects.create(
        client=client,
        conversation=debug_conversation,
        tool=tool,
        params={"order_id": "TH-12345"},
        params_hash="x" * 64,
        proposed_in=proposed_in,
        expires_at=timezone.now() + timedelta(minutes=30),
        idempotency_key="pa-1",
    )
    execution = ToolExecution.objects.create(
        client=client,
        conversation=debug_conversation,
        tool=tool,
        pending_action=action,
        params={"order_id": "TH-12345"},
        idempotency_key="ex-1",
        status="failed",
        error="HTTP 503 from the shop",
        attempts=3,
    )
    return action, execution


@pytest.mark.parametrize(
    "name",
    [
        "conversations_conversation",
        "tools_clienttool",
        "tools_pendingaction",
        "tools_toolexecution",
        "escalations_escalation",
        "reasoning_reasoningtrace",
    ],
)
def test_changelists_load(admin_client, audit_rows, name):
    response = admin_client.get(reverse(f"admin:{name}_changelist"))
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) >= 1


@pytest.mark.parametrize("name", ["tools_pendingaction", "tools_toolexecution"])
def test_audit_lists_are_read_only(admin_client, audit_rows, name):
    obj = audit_rows[0] if name == "tools_pendingaction" else audit_rows[1]
    assert admin_client.get(reverse(f"admin:{name}_add")).status_code == 403
    page = admin_client.get(reverse(f"admin:{name}_change", args=[obj.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="_save"' not in body
    assert "&quot;order_id&quot;: &quot;TH-12345&quot;" in body
    assert admin_client.get(reverse(f"admin:{name}_delete", args=[obj.pk])).status_code == 403


def test_audit_lists_filter_by_tool_kind_and_status(admin_client, audit_rows):
    url = reverse("admin:tools_toolexecution_changelist")
    hit = admin_client.get(url, {"tool__kind__exact": "destructive", "status__exact": "failed"})
    assert len(hit.context["cl"].result_list) == 1
    miss = admin_client.get(url, {"tool__kind__exact": "read"})
    assert len(miss.context["cl"].result_list) == 0


def test_escalation_action_hands_the_conversation_back(admin_client, debug_conversation):
    escalation = Escalation.objects.get(conversation=debug_conversation)
    url = reverse("admin:escalations_escalation_changelist")
    assert "Resolve and hand back to the AI" in admin_client.get(url).content.decode()
    response = admin_client.post(
        url,
        {"action": "resolve_and_hand_back", "_selected_action": [escalation.pk]},
        follow=True,
    )
    assert "Resolved 1 escalation(s)" in response.content.decode()
    escalation.refresh_from_db()
    debug_conversation.refresh_from_db()
    assert escalation.status == EscalationStatus.RESOLVED
    assert escalation.resolved_at is not None
    assert debug_conversation.status == ConversationStatus.OPEN


def test_escalation_page_is_read_only_and_links_to_the_conversation(
    admin_client, debug_conversation
):
    escalation = Escalation.objects.get(conversation=debug_conversation)
    url = reverse("admin:escalations_escalation_change", args=[escalation.pk])
    body = admin_client.get(url).content.decode()
    assert 'name="_save"' not in body
    assert change_url(debug_conversation) in body
    assert admin_client.post(url, {"status": "resolved"}).status_code == 403
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.OPEN


def test_trace_page_shows_its_steps_read_only(admin_client, debug_conversation):
    trace = ReasoningTrace.objects.get(user_message__seq=1, conversation=debug_conversation)
    response = admin_client.get(reverse("admin:reasoning_reasoningtrace_change", args=[trace.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'name="_save"' not in body
    for text in ["tool:get_order_status", "812", "low_confidence", "policies.shipping"]:
        assert text in body


def test_debug_view_shows_the_customers_address_and_what_they_saw(admin_client, debug_conversation):
    Conversation.objects.unscoped("test checks the database directly").filter(
        pk=debug_conversation.pk
    ).update(contact_email="ann@example.com", customer_seen_seq=3, customer_seen_at=timezone.now())
    body = admin_client.get(change_url(debug_conversation)).content.decode()
    assert "ann@example.com" in body
    assert "up to message #3" in body
    # ...and the list finds the conversation by the address
    found = admin_client.get(
        reverse("admin:conversations_conversation_changelist") + "?q=ann@example.com"
    )
    assert str(debug_conversation.public_id) in found.content.decode()
