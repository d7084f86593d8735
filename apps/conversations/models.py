from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk, status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel, TenantQuerySet


class ConversationStatus(models.TextChoices):
    OPEN = "open", _("Open — the assistant answers")
    ESCALATED = "escalated", _("Escalated — a human owns it, no AI runs")
    CLOSED = "closed", _("Closed")


class CustomerVerification(models.TextChoices):
    HMAC = "hmac", _("Signed id (HMAC)")
    JWT = "jwt", _("Signed token (JWT)")
    EMAIL_CODE = "email_code", _("One-time code by e-mail")
    # An e-mail whose From address the inbound provider (or the trusted Authentication-Results
    # header) reported DKIM or SPF passing for (apps/mail, docs/email.md "Identity").
    EMAIL_SENDER = "email_sender", _("Verified e-mail sender (DKIM/SPF)")


class Channel(models.TextChoices):
    """Where the customer writes: the chat widget, or e-mail (apps/mail, docs/email.md)."""

    WIDGET = "widget", _("Chat widget")
    EMAIL = "email", _("E-mail")


class Conversation(PublicTenantModel):
    visitor_id = models.CharField(
        max_length=128,
        blank=True,
        help_text=_("The visitor's identity as the client knows it."),
        verbose_name=_("visitor id"),
    )
    visitor_token_hash = models.CharField(
        max_length=64, blank=True, editable=False, verbose_name=_("visitor token hash")
    )
    status = status_field(ConversationStatus.OPEN, max_length=12)
    channel = models.CharField(
        max_length=8, choices=Channel.choices, default=Channel.WIDGET, verbose_name=_("channel")
    )
    language = models.CharField(max_length=16, default="en", verbose_name=_("language"))
    last_seq = models.PositiveIntegerField(default=0, editable=False, verbose_name=_("last seq"))
    # Turns of one conversation run one at a time, in message order (apps.reasoning.services).
    turn_lock_until = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("turn lock until")
    )
    last_message_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last message at"))
    # Returning customers (docs/widget.md "Coming back"): an address the customer left during a
    # hand-off, what the widget has shown them, and which staff replies were e-mailed.
    contact_email = models.EmailField(
        _("customer's e-mail"),
        blank=True,
        help_text=(
            _(
                "Left by the customer in the widget; staff replies they miss are e-mailed here "
                "once "
                "the customer has confirmed the address."
            )
        ),
    )
    # When the customer clicked the confirmation link for `contact_email` (None: not yet).
    # Staff replies are e-mailed only to a confirmed address (docs/widget.md "Coming back").
    contact_email_confirmed_at = models.DateTimeField(
        _("e-mail confirmed at"), null=True, blank=True, editable=False
    )
    # The highest seq the customer's widget has displayed (it reports it with GET …/messages
    # ?after=<seq>), and when it last did so.
    customer_seen_seq = models.PositiveIntegerField(
        default=0, editable=False, verbose_name=_("customer seen seq")
    )
    customer_seen_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("customer seen at")
    )
    # Staff replies up to this seq have been e-mailed (or were seen): never mailed twice.
    reply_emailed_seq = models.PositiveIntegerField(
        default=0, editable=False, verbose_name=_("reply emailed seq")
    )
    reply_emailed_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("reply emailed at")
    )
    # Verified customer identity (docs/widget.md "Identity verification"): set only from a
    # signature made by the business's backend (an HMAC of the id, or a short-lived JWT) or a
    # correct one-time code sent to an address a tool returned — never from the visitor's word.
    # Empty customer_id: an anonymous visitor; `customer_scoped` tools never run for them.
    customer_id = models.CharField(_("verified customer id"), max_length=255, blank=True)
    customer_email = models.EmailField(_("verified customer e-mail"), blank=True)
    customer_name = models.CharField(_("verified customer name"), max_length=200, blank=True)
    customer_verified_via = models.CharField(
        _("verified by"), max_length=16, choices=CustomerVerification.choices, blank=True
    )
    customer_verified_at = models.DateTimeField(
        _("customer verified at"), null=True, blank=True, editable=False
    )
    # The staff member who owns the conversation in the console's inbox (claimed or assigned);
    # None: nobody — the assistant's, or waiting for staff when escalated.
    assignee = optional_fk("accounts.User", _("assigned to"))

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        indexes = [
            models.Index(fields=["client", "status", "-created_at"]),
            models.Index(fields=["client", "-created_at"]),
            # A verified customer's conversations, across devices (console, privacy).
            models.Index(fields=["client", "customer_id"], name="conv_client_customer_idx"),
            # The inbox: the client's conversations, latest activity first.
            models.Index(
                F("client"),
                F("last_message_at").desc(),
                F("id").desc(),
                name="conv_client_activity_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"Conversation {self.public_id}"

    @property
    def customer_verified(self) -> bool:
        return bool(self.customer_id and self.customer_verified_at)

    @property
    def ai_may_reply(self) -> bool:
        return self.status == ConversationStatus.OPEN


class Role(models.TextChoices):
    USER = "user", _("Customer")
    ASSISTANT = "assistant", _("Assistant")
    STAFF = "staff", _("Staff")
    SYSTEM = "system", _("System")
    TOOL = "tool", _("Tool")


class Visibility(models.TextChoices):
    VISIBLE = "visible", _("Visible to the customer")
    INTERNAL = "internal", _("Internal (staff only)")


class Kind(models.TextChoices):
    # visible
    TEXT = "text", _("Message")
    CONFIRMATION_REQUEST = "confirmation_request", _("Confirmation request")
    HANDOFF = "handoff", _("Hand-off to a human")
    NOTICE = "notice", _("Notice")
    CLARIFICATION = "clarification", _("Clarifying question")  # data.options: quick replies
    # internal — staff only (the debug view's legend explains each)
    ASSESSMENT = "assessment", _("Assessment")
    CONTEXT_FETCH = "context_fetch", _("Context fetch")
    CRITIQUE = "critique", _("Critique")
    GUARD = "guard", _("Guard decision")
    TOOL_CALL = "tool_call", _("Tool call")
    TOOL_RESULT = "tool_result", _("Tool result")
    ESCALATION = "escalation", _("Escalation")
    EVALUATION = "evaluation", _("Evaluation")
    REASONING_STEP = "reasoning_step", _("Reasoning step")
    FEEDBACK = "feedback", _("Feedback")
    REFINEMENT = "refinement", _("Refinement")
    ERROR = "error", _("Error")
    STAFF_NOTE = "staff_note", _("Staff note")  # a teammate's note, never shown to the customer


class MessageQuerySet(TenantQuerySet["Message"]):
    def visible(self) -> MessageQuerySet:
        return self.filter(visibility=Visibility.VISIBLE)


class Message(TenantOwnedModel):
    conversation = conversation_fk(related_name="messages")
    # The id the APIs show (widget and staff): opaque, so it tells nobody how many messages
    # other tenants have. `seq` numbers the messages within their conversation.
    public_id = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, verbose_name=_("public id")
    )
    seq = models.PositiveIntegerField(verbose_name=_("seq"))
    role = models.CharField(max_length=10, choices=Role.choices, verbose_name=_("role"))
    visibility = models.CharField(
        max_length=10,
        choices=Visibility.choices,
        default=Visibility.VISIBLE,
        verbose_name=_("visibility"),
    )
    kind = models.CharField(
        max_length=24, choices=Kind.choices, default=Kind.TEXT, verbose_name=_("kind")
    )
    text = models.TextField(blank=True, verbose_name=_("text"))
    data = models.JSONField(default=dict, blank=True, verbose_name=_("data"))
    # The language the text is in (en, es, he, …), detected when a customer writes and set by
    # the step that wrote an assistant reply; empty when unknown.
    language = models.CharField(max_length=16, blank=True, default="", verbose_name=_("language"))
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"), related_name="messages")
    author = optional_fk("accounts.User", _("author"))

    objects = MessageQuerySet.as_manager()  # type: ignore[misc]
    # Not a column: set on the instance `handle_turn` returns once the commit has queued its
    # turn for a worker (the widget's POST then answers 202 without reading the turn again).
    turn_queued: bool = False

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="uniq_message_seq")
        ]
        indexes = [models.Index(fields=["client", "conversation", "visibility", "seq"])]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}/{self.kind}: {self.text[:60]}"


# The customer's rating of a conversation (docs/outcomes.md, "CSAT"): one per conversation,
# changeable for a short while after it was first given.
RATING_MIN = 1
RATING_MAX = 5
RATING_COMMENT_MAX_CHARS = 1000


class ConversationRating(TenantOwnedModel):
    conversation = conversation_fk(related_name="rating", one_to_one=True)
    score = models.PositiveSmallIntegerField(
        _("score"), help_text=_("1 (very unhappy) to 5 (very happy).")
    )
    comment = models.TextField(_("comment"), blank=True, max_length=RATING_COMMENT_MAX_CHARS)

    class Meta:
        verbose_name = _("conversation rating")
        verbose_name_plural = _("conversation ratings")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(score__gte=RATING_MIN, score__lte=RATING_MAX),
                name="rating_score_range",
            )
        ]
        indexes = [models.Index(fields=["client", "created_at"])]

    def __str__(self) -> str:
        return f"{self.score}/5 for {self.conversation_id}"

    @property
    def positive(self) -> bool:
        return self.score >= 4
