"""Template tags for the staff sign-in pages (templates/allauth/, templates/account/)."""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import get_adapter
from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def signup_open(context: dict[str, Any]) -> bool:
    """Whether the account adapter lets people sign up (`is_open_for_signup`), so the pages
    offer sign-up exactly when it works — never hard-coded in a template."""
    request = context.get("request")
    return bool(request is not None and get_adapter(request).is_open_for_signup(request))
