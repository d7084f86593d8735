"""What several steps' prompts share. Kept short: tokens are money (see the cost benchmark)."""

from __future__ import annotations

from typing import Any

RULES = """Rules:
- Answer only from the business information given; if it is not there, say so or ask.
- Use a tool only when the customer asked for what it does. Never invent parameter values:
  if a required value is missing, ask for it.
- Destructive actions (cancel, delete, refund) always need the customer's explicit confirmation
  of the exact details first; GuideDesk asks for it and runs the tool after a "yes".
- Be friendly and concise. Reply in the customer's language."""


def business_facts(business_info: dict[str, Any] | None) -> dict[str, Any]:
    """The business info the offline demo answers questions from (FAQs, policies, contact)."""
    info = business_info or {}
    return {
        "faqs": info.get("faqs", []),
        "policies": info.get("policies", {}),
        "contact": info.get("contact", {}),
    }
