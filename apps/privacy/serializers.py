from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.schema import NamedChoiceField
from apps.privacy.models import DataSubjectRequest, MatchKind, RequestChannel, RequestKind

MATCH_FIELDS = ("email", "conversation", "visitor", "customer")


class PrivacyRequestSerializer(serializers.ModelSerializer[DataSubjectRequest]):
    """A record of an export, erasure or retention run: counts, never content."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    kind = NamedChoiceField(choices=RequestKind, enum_name="PrivacyRequestKind")
    match_kind = NamedChoiceField(choices=MatchKind, enum_name="PrivacyMatchKind")
    channel = NamedChoiceField(choices=RequestChannel, enum_name="PrivacyRequestChannel")
    requested_by = serializers.SerializerMethodField()

    class Meta:
        model = DataSubjectRequest
        fields = [
            "id",
            "kind",
            "match_kind",
            "match_digest",
            "channel",
            "requested_by",
            "conversations",
            "counts",
            "unconfirmed_left_out",
            "not_erased",
            "created_at",
            "keep_until",
        ]
        read_only_fields = fields

    def get_requested_by(self, obj: DataSubjectRequest) -> str:
        if obj.requested_by_id is not None and obj.requested_by is not None:
            return obj.requested_by.email
        return obj.requested_by_label


class PrivacyRequestCreateSerializer(serializers.Serializer[dict[str, Any]]):
    """Who the request is about (exactly one of `email`, `conversation`, `visitor`,
    `customer`) and what to do."""

    kind = NamedChoiceField(
        choices=[(RequestKind.EXPORT, "Export"), (RequestKind.ERASE, "Erasure")],
        enum_name="PrivacyRequestAction",
    )
    email = serializers.EmailField(required=False, max_length=254)
    conversation = serializers.UUIDField(required=False)
    visitor = serializers.CharField(required=False, max_length=128, trim_whitespace=True)
    customer = serializers.CharField(
        required=False,
        max_length=255,
        trim_whitespace=True,
        help_text="A verified customer id (the id your site signed for the widget).",
    )
    dry_run = serializers.BooleanField(required=False, default=False)
    include_unconfirmed = serializers.ListField(
        child=serializers.UUIDField(),
        required=False,
        default=list,
        max_length=500,
        help_text="By e-mail: ids of conversations whose address was never confirmed that staff "
        "checked are this customer's, to include (see `unconfirmed` in the answer).",
    )
    identifiers = serializers.ListField(
        child=serializers.CharField(min_length=3, max_length=200, trim_whitespace=True),
        required=False,
        default=list,
        max_length=50,
        help_text="Erasure: words that identify the customer and that no shape recognises (a "
        "name or an address they typed), redacted wherever they appear.",
    )
    format = NamedChoiceField(
        choices=[("json", "JSON"), ("html", "HTML")],
        enum_name="PrivacyExportFormat",
        required=False,
        default="json",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [name for name in MATCH_FIELDS if attrs.get(name) not in (None, "")]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"email": "Give exactly one of email, conversation, visitor or customer."}
            )
        attrs["match_kind"] = given[0]
        attrs["match_value"] = str(attrs[given[0]])
        return attrs


class UnconfirmedMatchSerializer(serializers.Serializer[dict[str, Any]]):
    """A conversation with the address that the customer never confirmed: for staff to check
    before including it by id. No content."""

    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    last_message_at = serializers.DateTimeField(allow_null=True)
    customer_messages = serializers.IntegerField()


class NotErasedSerializer(serializers.Serializer[dict[str, Any]]):
    code = serializers.CharField()
    where = serializers.CharField()
    what = serializers.CharField()
    why = serializers.CharField()
    rows = serializers.IntegerField()


class PrivacyDryRunSerializer(serializers.Serializer[dict[str, Any]]):
    dry_run = serializers.BooleanField()
    kind = serializers.CharField()
    conversations = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())
    unconfirmed = UnconfirmedMatchSerializer(many=True)
    not_erased = NotErasedSerializer(many=True, required=False)


class PrivacyErasedSerializer(PrivacyRequestSerializer):
    """An erasure's record, with the unconfirmed matches it left out listed."""

    unconfirmed = serializers.SerializerMethodField()

    class Meta(PrivacyRequestSerializer.Meta):
        fields = [*PrivacyRequestSerializer.Meta.fields, "unconfirmed"]
        read_only_fields = fields

    @extend_schema_field(UnconfirmedMatchSerializer(many=True))
    def get_unconfirmed(self, obj: DataSubjectRequest) -> list[dict[str, Any]]:
        return list(self.context.get("unconfirmed", []))


class UnconfirmedOnlySerializer(serializers.Serializer[dict[str, Any]]):
    error = serializers.DictField()
    unconfirmed = UnconfirmedMatchSerializer(many=True)
