"""Events out: the business's subscriptions and the log of every delivery (docs/events.md)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel


class EventType(models.TextChoices):
    CONVERSATION_CREATED = "conversation.created", "conversation.created"
    MESSAGE_CREATED = "message.created", "message.created"
    CONVERSATION_HANDED_OFF = "conversation.handed_off", "conversation.handed_off"
    CONVERSATION_HANDED_BACK = "conversation.handed_back", "conversation.handed_back"
    CONVERSATION_RESOLVED = "conversation.resolved", "conversation.resolved"
    CONVERSATION_RATED = "conversation.rated", "conversation.rated"
    APPROVAL_REQUESTED = "approval.requested", "approval.requested"
    APPROVAL_DECIDED = "approval.decided", "approval.decided"
    TOOL_EXECUTED = "tool.executed", "tool.executed"


# What a chat alert (Slack, Teams) is sent for: someone on the team has to act.
ALERT_TYPES = (EventType.CONVERSATION_HANDED_OFF, EventType.APPROVAL_REQUESTED)


class SubscriptionFormat(models.TextChoices):
    EVENTS = "events", _("Signed events (JSON, Standard Webhooks)")
    CHAT = "chat", _("Chat alert (Slack / Teams incoming webhook)")


class EventSubscription(PublicTenantModel):
    """An endpoint of the business that receives the client's events of the chosen types."""

    name = models.CharField(_("name"), max_length=100, blank=True)
    url = models.URLField(_("URL"), max_length=500)
    format = models.CharField(
        _("format"),
        max_length=10,
        choices=SubscriptionFormat.choices,
        default=SubscriptionFormat.EVENTS,
    )
    # The Standard Webhooks signing secret (`whsec_…`): shown once, when the subscription is
    # created; never again.
    secret = models.CharField(_("signing secret"), max_length=200, editable=False)
    event_types = models.JSONField(_("event types"), default=list, blank=True)
    include_customer_text = models.BooleanField(
        _("include customer text"),
        default=False,
        help_text=_(
            "Send what the customer and staff wrote, and tool parameters and results. Off: "
            "events carry ids, statuses and times only."
        ),
    )
    active = models.BooleanField(_("active"), default=True)

    class Meta:
        verbose_name = _("event subscription")
        verbose_name_plural = _("event subscriptions")
        ordering = ["created_at"]
        indexes = [models.Index(fields=["client", "active"])]

    def __str__(self) -> str:
        return self.name or self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENDING = "sending", _("Sending")
    RETRYING = "retrying", _("Retrying")
    DELIVERED = "delivered", _("Delivered")
    FAILED = "failed", _("Failed")


# Not finished: a later event of the same conversation waits for these (ordering).
UNFINISHED = (DeliveryStatus.PENDING, DeliveryStatus.SENDING, DeliveryStatus.RETRYING)


class EventDelivery(TenantOwnedModel):
    """One event to one subscription: its payload as sent, and how sending it went. The
    event's id is the `webhook-id` of every attempt."""

    subscription = models.ForeignKey(
        EventSubscription,
        on_delete=models.CASCADE,
        related_name="deliveries",
        verbose_name=_("subscription"),
    )
    event_id = models.UUIDField(_("event id"))
    event_type = models.CharField(_("event type"), max_length=40, choices=EventType.choices)
    # The conversation's public id (not a foreign key: the log outlives an erasure, which
    # blanks the customer's words in it instead — apps/events/services.py).
    conversation_public_id = models.UUIDField(_("conversation"), null=True, blank=True)
    payload = models.JSONField(_("payload"), default=dict)
    status = status_field(DeliveryStatus.PENDING, max_length=10)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    last_status_code = models.PositiveSmallIntegerField(_("last status code"), null=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    latency_ms = models.PositiveIntegerField(_("latency (ms)"), null=True)
    next_attempt_at = models.DateTimeField(_("next attempt at"), null=True, db_index=True)
    delivered_at = models.DateTimeField(_("delivered at"), null=True)
    content_erased = models.BooleanField(_("customer text erased"), default=False)

    class Meta:
        verbose_name = _("event delivery")
        verbose_name_plural = _("event deliveries")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "subscription", "event_id"], name="events_delivery_once"
            )
        ]
        indexes = [
            models.Index(fields=["client", "subscription", "conversation_public_id", "status"]),
            models.Index(fields=["client", "event_type"]),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id}"
