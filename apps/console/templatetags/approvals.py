"""`{% conversation_approvals conversation access %}`: the conversation page's box of the tool
calls held for a teammate's approval in that conversation (nothing when there are none)."""

from __future__ import annotations

from typing import Any

from django import template

from apps.approvals.selectors import approval_list
from apps.approvals.services import MAX_REASON_CHARS
from apps.console.approvals import approval_rows

register = template.Library()


@register.inclusion_tag("console/_approvals.html")
def conversation_approvals(conversation: Any, access: Any) -> dict[str, Any]:
    rows = approval_rows(
        access, approval_list(client=access.client, conversation=conversation)[:20]
    )
    return {"rows": rows, "access": access, "back": "conversation", "max_reason": MAX_REASON_CHARS}
