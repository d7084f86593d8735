from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk, status_field
from apps.core.models import PublicTenantModel


class EscalationReason(models.TextChoices):
    CUSTOMER_REQUEST = "customer_request", _("Customer asked for a human")
    LOW_CONFIDENCE = "low_confidence", _("Assistant not confident")
    POLICY = "policy", _("Policy / safety decision")
    TOOL_FAILURE = "tool_failure", _("Tool failed")
    LLM_FAILURE = "llm_failure", _("LLM unavailable or invalid")
    USAGE_LIMIT = "usage_limit", _("Usage limit reached")
    STAFF_TAKEOVER = "staff_takeover", _("Staff took over")
    DEADLINE = "deadline", _("Turn ran out of time")
    SYSTEM_FAILURE = "system_failure", _("Turn could not run (database or worker failure)")
    APPROVAL_TIMEOUT = "approval_timeout", _("No teammate approved the action in time")


class EscalationStatus(models.TextChoices):
    OPEN = "open", _("Open — a human owns the conversation")
    RESOLVED = "resolved", _("Resolved — handed back to the AI")


class Escalation(PublicTenantModel):
    conversation = conversation_fk(related_name="escalations")
    reason = models.CharField(
        max_length=20, choices=EscalationReason.choices, verbose_name=_("reason")
    )
    detail = models.TextField(blank=True, verbose_name=_("detail"))
    status = status_field(EscalationStatus.OPEN, max_length=10)
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"))
    assigned_to = optional_fk("accounts.User", _("assigned to"))
    resolved_at = models.DateTimeField(null=True, blank=True, verbose_name=_("resolved at"))
    resolved_by = optional_fk("accounts.User", _("resolved by"))
    notified_at = models.DateTimeField(null=True, blank=True, verbose_name=_("notified at"))

    class Meta:
        verbose_name = _("escalation")
        verbose_name_plural = _("escalations")
        indexes = [models.Index(fields=["client", "status", "-created_at"])]
        constraints = [
            # At most one open escalation per conversation.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status="open"),
                name="uniq_open_escalation_per_conversation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} ({self.status})"


# -- staff tools: reply templates and flags on the assistant's answers ---------------------------

# The variables a reply template may use, and where each value comes from
# (apps/escalations/reply_templates.py, docs/api.md "Reply templates").
TEMPLATE_VARIABLES = ("customer_name", "customer_email", "order_id", "agent_name")
TEMPLATE_BODY_MAX_CHARS = 4000
# `{{` and `}}` are literal braces; `{name}` is a variable; a lone brace is a mistake.
TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def template_variables(body: str) -> list[str]:
    """The variables `body` uses, in order; ValidationError for an unknown variable or a lone
    brace (so a typo like `{order}` is caught when the template is saved, not when a customer
    would read it)."""
    found: list[str] = []
    unknown: list[str] = []
    for match in TEMPLATE_TOKEN.finditer(body):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        name = match.group(1)
        if name is None:
            raise ValidationError(
                _("A lone “%(brace)s”: write %(double)s for a literal brace."),
                code="brace",
                params={"brace": token, "double": token * 2},
            )
        if name.strip() in TEMPLATE_VARIABLES:
            found.append(name.strip())
        else:
            unknown.append("{" + name + "}")
    if unknown:
        raise ValidationError(
            _("Unknown variable %(names)s. Known: %(known)s."),
            code="unknown_variable",
            params={
                "names": ", ".join(unknown),
                "known": ", ".join("{" + v + "}" for v in TEMPLATE_VARIABLES),
            },
        )
    return found


def validate_template_body(body: str) -> None:
    template_variables(body)


class ReplyTemplate(PublicTenantModel):
    """A canned staff reply of one client, picked in the console by name or shortcut. Its body
    may hold `{customer_name}`, `{customer_email}`, `{order_id}` and `{agent_name}`; any other
    `{name}` is refused when it is saved (`{{` and `}}` write literal braces)."""

    name = models.CharField(_("name"), max_length=80)
    shortcut = models.SlugField(
        _("shortcut"),
        max_length=40,
        help_text=_("Typed after “/” in the console's reply box, e.g. refund-sent."),
    )
    body = models.TextField(
        _("body"),
        max_length=TEMPLATE_BODY_MAX_CHARS,
        validators=[validate_template_body],
        help_text=_(
            "The reply. Variables: {customer_name}, {customer_email}, {order_id}, "
            "{agent_name}; write {{ and }} for literal braces. A variable with no verified value "
            "must be filled in by hand before the reply can be sent."
        ),
    )

    class Meta:
        verbose_name = _("reply template")
        verbose_name_plural = _("reply templates")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "shortcut"], name="uniq_reply_template_shortcut"
            )
        ]

    def __str__(self) -> str:
        return f"/{self.shortcut} — {self.name}"
