"""Approvals and flags each have one home: `apps/approvals` and `apps/flags` own their models
(on the tables the tools and escalations apps created: the move is Django state only, rows
stay), the writes to them, and the tasks; every other app calls them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.conf import settings

from apps.approvals import tasks
from apps.approvals.models import ApprovalRequest, ApprovalStatus, WithdrawnBecause
from apps.approvals.withdrawal import approvals_withdraw
from apps.conversations.models import Role
from apps.conversations.services import message_append
from apps.flags.models import MessageFlag
from tests.support.approvals import pending_approval

ROOT = Path(settings.BASE_DIR)
# The models, where they live now, and the apps that may write their rows.
HOMES = {"ApprovalRequest": "apps/approvals/", "MessageFlag": "apps/flags/"}
WRITES = {"create", "update", "delete", "bulk_create", "get_or_create", "update_or_create", "save"}


def test_the_moved_models_keep_their_tables():
    assert ApprovalRequest._meta.app_label == "approvals"
    assert ApprovalRequest._meta.db_table == "tools_approvalrequest"
    assert MessageFlag._meta.app_label == "flags"
    assert MessageFlag._meta.db_table == "escalations_messageflag"


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else None


def writes_outside_home(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "apps").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if "/migrations/" in relative:
            continue
        text = path.read_text()
        if not any(model in text for model in HOMES):
            continue
        for node in ast.walk(ast.parse(text, relative)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            model = _root_name(func)
            written = isinstance(func, ast.Attribute) and func.attr in WRITES
            built = isinstance(func, ast.Name) and func.id in HOMES
            if model in HOMES and (written or built) and not relative.startswith(HOMES[model]):
                found.append(f"{relative}:{node.lineno} writes {model}")
    return found


def test_only_the_home_app_writes_its_rows():
    assert writes_outside_home() == []


def test_the_scan_sees_writes_outside_the_home(tmp_path):
    (tmp_path / "apps" / "tools").mkdir(parents=True)
    (tmp_path / "apps" / "flags").mkdir()
    (tmp_path / "apps" / "tools" / "stray.py").write_text(
        "ApprovalRequest.objects.for_client(c).filter(pk=1).update(status='x')\n"
        "MessageFlag(client=c).save()\n"
        "ApprovalRequest.objects.for_client(c).filter(pk=1).exists()\n"
    )
    (tmp_path / "apps" / "flags" / "services.py").write_text("MessageFlag.objects.create()\n")
    assert writes_outside_home(tmp_path) == [
        "apps/tools/stray.py:1 writes ApprovalRequest",
        "apps/tools/stray.py:2 writes MessageFlag",
        "apps/tools/stray.py:2 writes MessageFlag",
    ]


def test_the_task_names_queued_before_the_move_are_kept():
    assert tasks.run_approved_action.name == "reasoning.run_approved_action"
    assert tasks.expire_approvals.name == "reasoning.expire_approvals"
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "reasoning.expire_approvals" in scheduled
    assert tasks.run_approved_action.tenant_from == ("approvals.ApprovalRequest", "approval_id")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("reading", "status", "because"),
    [
        ("yes", ApprovalStatus.PENDING, WithdrawnBecause.NONE),
        ("no", ApprovalStatus.WITHDRAWN, WithdrawnBecause.DECLINED),
        ("other", ApprovalStatus.WITHDRAWN, WithdrawnBecause.NEW_MESSAGE),
    ],
)
def test_a_withdrawal_reads_the_message_with_the_caller_s_rule(client_a, reading, status, because):
    """The approvals app sits below reasoning: the turn passes the guards' yes/no reading in,
    and that reading alone decides (whatever the text says)."""
    approval = pending_approval(client_a)
    later = message_append(
        client=client_a, conversation=approval.conversation, role=Role.USER, text="ok"
    )
    seen: list[tuple[str, dict]] = []

    def answer(text, params):
        seen.append((text, dict(params)))
        return reading

    approvals_withdraw(
        client=client_a, conversation=approval.conversation, message=later, answer=answer
    )
    approval.refresh_from_db()
    assert seen == [("ok", {"order_id": "TH-12345", "amount": 150})]
    assert (approval.status, approval.withdrawn_because) == (status, because)
