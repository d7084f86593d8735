"""The client admin's change form as staff send it, for the admin tests."""

from __future__ import annotations

import re
from typing import Any

from apps.clients.models import Client


def client_form(page: str, shop: Client, **fields: Any) -> dict[str, Any]:
    """What the client change form `page` (its HTML) sends for `shop`: its settings as they
    stand, no inline rows (each inline's management form at zero), `fields` replacing or adding
    any."""
    data: dict[str, Any] = {
        "name": shop.name,
        "slug": shop.slug,
        "plan": shop.plan.pk,
        "is_active": "on",
        "language": "en",
        "support_email": shop.support_email,
        "greeting": "Hi",
        "allowed_origins": '["https://shop.example"]',
        "remember_conversation_hours": "24",
        **fields,
    }
    for prefix in re.findall(r'name="([\w-]+)-TOTAL_FORMS"', page):
        data |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"}
    return data
