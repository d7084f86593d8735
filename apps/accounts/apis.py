"""API key management for a client's admins and owners."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.models import ApiKey, Role
from apps.accounts.services import api_key_issue, api_key_revoke
from apps.api.permissions import MANAGE, StaffAPIView, acting_user, ensure_may_grant
from apps.api.schema import (
    NamedChoiceField,
    ResourceSchema,
    found_or_404,
    id_path_parameter,
    parse_pk,
)
from apps.api.serializers import validated_body
from apps.clients.models import Client

TAG = "api keys"

# ---------------------------------------------------------------------------------------------
# Reads (selectors in the sense of docs/architecture.md: read functions that take the tenant;
# they belong in apps/accounts/selectors.py).
# ---------------------------------------------------------------------------------------------


def api_key_list(*, client: Client) -> QuerySet[ApiKey]:
    """All the client's keys, revoked ones included, newest first."""
    return ApiKey.objects.for_client(client).order_by("-created_at", "-pk")


def api_key_get(*, client: Client, key_id: str) -> ApiKey | None:
    pk = parse_pk(key_id)
    if pk is None:
        return None
    return ApiKey.objects.for_client(client).filter(pk=pk).first()


# ---------------------------------------------------------------------------------------------
# Serializers
# ---------------------------------------------------------------------------------------------


class ApiKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="Identifies the key: its secret starts gd_<prefix>_.")
    role = NamedChoiceField(choices=Role, enum_name="StaffRole")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(
        allow_null=True, help_text="Updated at most once a minute."
    )
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    secret = serializers.CharField(
        help_text="The whole key for `Authorization: Api-Key <secret>`. Shown only in this "
        "response: it is stored hashed and cannot be shown again."
    )


class ApiKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What the key is for.")
    role = NamedChoiceField(
        choices=Role,
        enum_name="StaffRole",
        default=Role.VIEWER,
        help_text="The key's role; at most your own. Defaults to viewer (read only).",
    )


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------

KEY_EXAMPLE: dict[str, Any] = {
    "id": 12,
    "name": "ERP sync",
    "prefix": "3fa91c0d",
    "role": "viewer",
    "created_at": "2026-03-01T08:00:00.000000Z",
    "last_used_at": "2026-03-02T09:00:11.000000Z",
    "revoked_at": None,
}
KEY_ID_PARAMETER = id_path_parameter("key_id", "The API key's id.")


API_KEYS = ResourceSchema("api_keys", TAG, KEY_ID_PARAMETER)


class ApiKeyListCreateApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "POST": MANAGE}

    @API_KEYS.list_page(
        "List API keys",
        "The client's API keys, revoked ones included, newest first. Secrets are "
        "never listed. Needs the admin role.",
        serializer=ApiKeySerializer,
        example=KEY_EXAMPLE,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(api_key_list, ApiKeySerializer)

    @API_KEYS.create(
        "Issue an API key",
        "Creates a key and returns its secret once. You cannot grant a role above "
        "your own (403). Needs the admin role.",
        request=ApiKeyCreateSerializer,
        invalid=("name", "This field may not be blank."),
        not_found=False,
        body=ApiKeyCreatedSerializer,
        requests={"Read-only key": {"name": "ERP sync", "role": "viewer"}},
        created={**KEY_EXAMPLE, "last_used_at": None, "secret": "gd_3fa91c0d_Vb7…(43 characters)"},
        created_name="Issued",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(ApiKeyCreateSerializer, request)
        role = body["role"]
        ensure_may_grant(actor_role=self.role, role=role)
        key, secret = api_key_issue(
            client=self.client,
            name=body["name"],
            role=role,
            created_by=acting_user(request),
        )
        return Response(
            {**ApiKeySerializer(key).data, "secret": secret}, status=status.HTTP_201_CREATED
        )


class ApiKeyRevokeApi(StaffAPIView):
    required_roles = {"POST": MANAGE}

    @API_KEYS.action(
        "revoke",
        "Revoke an API key",
        "The key stops working at once (401 on its next request). Revoking a "
        "revoked key changes nothing and answers 200. You cannot revoke a key whose role is "
        "above your own (403). No request body. Needs the admin role.",
        body=ApiKeySerializer,
        answer={**KEY_EXAMPLE, "revoked_at": "2026-03-02T10:00:00.000000Z"},
        answer_name="Revoked",
    )
    def post(self, request: Request, key_id: str) -> Response:
        key = found_or_404(api_key_get(client=self.client, key_id=key_id))
        ensure_may_grant(actor_role=self.role, role=key.role)
        revoked = api_key_revoke(client=self.client, api_key=key)
        return Response(ApiKeySerializer(revoked).data)
