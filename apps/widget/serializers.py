"""The widget API's request and response shapes: request validation and the OpenAPI schema
(docs/widget.md). The messages themselves are `apps.conversations.serializers.
WidgetMessageSerializer`."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.conversations.models import ConversationStatus
from apps.conversations.serializers import WidgetMessageSerializer


class WidgetConversationStartInSerializer(serializers.Serializer[Any]):
    visitor_id = serializers.CharField(
        max_length=128,
        required=False,
        allow_blank=True,
        help_text="The visitor's identity as your site knows it (optional, unverified).",
    )
    language = serializers.CharField(
        max_length=16,
        required=False,
        allow_blank=True,
        help_text="The widget's language (en, es, pt-BR…: the shop's data-language, the page's "
        "<html lang>, the browser's): a new conversation starts in it when the client serves "
        "it, else in the client's default.",
    )
    # Identity verification (docs/widget.md): a signed customer id, or a signed JWT.
    customer_id = serializers.CharField(
        max_length=255,
        required=False,
        allow_blank=True,
        help_text="Your signed-in customer's id; needs `user_hash`.",
    )
    user_hash = serializers.CharField(
        max_length=128,
        required=False,
        allow_blank=True,
        help_text="Hex HMAC-SHA256 of `customer_id` with the client's identity secret.",
    )
    identity_token = serializers.CharField(
        max_length=8192,
        required=False,
        allow_blank=True,
        help_text="Instead of customer_id + user_hash: a JWT (HS256 with the identity secret, "
        "or RS256) with `sub`, optional `email` and `name`, and `exp` at most 24 h ahead.",
    )

    identity_grant = serializers.CharField(
        max_length=2048,
        required=False,
        allow_blank=True,
        help_text="Instead of a signature: the `identity.grant` an earlier call of this page "
        "view returned (valid 1 hour).",
    )
    resume_only = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Only resume the verified customer's open conversation: nothing is created "
        "(200 with `id` null when there is none).",
    )
    new = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Start a new conversation even when the verified customer has an open one.",
    )


class WidgetIdentityOutSerializer(serializers.Serializer[Any]):
    verified = serializers.BooleanField(help_text="The conversation's customer is verified.")
    customer_id = serializers.CharField(help_text='The verified customer id ("" if none).')
    error = serializers.CharField(
        allow_null=True,
        help_text="Why the identity sent was not accepted (null: accepted, or none sent): "
        "not_configured, missing_signature, bad_signature, malformed, alg_not_allowed, "
        "missing_claim, expired, lifetime_too_long, replayed.",
    )
    grant = serializers.CharField(
        required=False,
        help_text="Only when verified: pass it as `identity_grant` for this page view's later "
        "conversations (a JWT is accepted once).",
    )


class WidgetConversationStartOutSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(
        allow_null=True, help_text="The conversation's public id (null: `resume_only`, none)."
    )
    token = serializers.CharField(
        allow_null=True, help_text="The visitor token; shown once, keep it."
    )
    resumed = serializers.BooleanField(
        help_text="A verified customer's open conversation was resumed (another device)."
    )
    identity = WidgetIdentityOutSerializer()


class WidgetConfirmSerializer(serializers.Serializer[Any]):
    """The Yes/No buttons' answer to a confirmation question, bound to that question."""

    action = serializers.IntegerField(
        min_value=1,
        max_value=2_147_483_647,
        help_text="The question's `data.pending_action`.",
    )
    digest = serializers.RegexField(
        r"^[0-9a-fA-F]{1,64}$",
        help_text="The question's `data.digest` (16 hex characters).",
    )
    answer = serializers.ChoiceField(choices=["yes", "no"], help_text='"yes" or "no".')


class WidgetMessageInSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(help_text="1–4,000 characters.")
    confirm = WidgetConfirmSerializer(
        required=False,
        allow_null=True,
        help_text=(
            "Optional: the customer pressed Yes or No under a confirmation question. It settles "
            "exactly that question when `action` and `digest` match the one open in this "
            "conversation and shown before (yes: the action runs; no: it is declined), whatever "
            "`text` says. Otherwise it is never a yes: the question expires and `text` is "
            "handled as a new message."
        ),
    )


class WidgetMessagePostOutSerializer(serializers.Serializer[Any]):
    message = WidgetMessageSerializer()
    replies = WidgetMessageSerializer(many=True)
    status = serializers.ChoiceField(
        choices=ConversationStatus.choices, required=False, help_text="Only on 201."
    )
    pending = serializers.BooleanField(required=False, help_text="Only on 202.")
    language = serializers.CharField(
        help_text="The conversation's current language (en, es, he, …): the language the "
        "assistant replies in; the widget may switch its own words to it."
    )


class WidgetContactSerializer(serializers.Serializer[Any]):
    email = serializers.CharField(
        allow_blank=True,
        help_text='The customer\'s e-mail address (at most 254 characters); "" forgets it.',
    )


class WidgetContactOutSerializer(WidgetContactSerializer):
    confirmed = serializers.BooleanField(
        help_text="The customer confirmed the address with the link we e-mailed; staff replies "
        "are e-mailed only to a confirmed address. false: a confirmation link was sent."
    )


class WidgetMessageListOutSerializer(serializers.Serializer[Any]):
    results = WidgetMessageSerializer(many=True)
    has_more = serializers.BooleanField()
    status = serializers.ChoiceField(choices=ConversationStatus.choices)
    typing = serializers.BooleanField(help_text="A turn is being processed right now.")
    contact_confirmed = serializers.BooleanField(
        help_text="The customer left an address and confirmed it with the link we e-mailed "
        "(staff replies they miss are e-mailed there)."
    )
    language = serializers.CharField(
        help_text="The conversation's current language (the one the assistant replies in)."
    )


class WidgetRatingInSerializer(serializers.Serializer):
    score = serializers.IntegerField(min_value=1, max_value=5)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class WidgetRatingOutSerializer(serializers.Serializer):
    score = serializers.IntegerField()
    comment = serializers.CharField()
