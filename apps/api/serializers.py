"""Serializer pieces shared by the API modules: a request body validated in one call, the base of
a body that refuses keys it does not declare, and the pair of fields that keep a secret
write-only."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request


def validated_body(
    serializer_class: type[serializers.Serializer], request: Request, *, partial: bool = False
) -> dict[str, Any]:
    """The request body validated by `serializer_class` (a 400 naming each bad field), as the
    query string is by `TenantAPIView.validated_query`."""
    body = serializer_class(data=request.data, partial=partial)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)


class RefusesUnknownFields(serializers.Serializer):
    """A request body that refuses, by name, every key it does not declare (instead of dropping
    it silently): a typo or a server-owned field is an error the caller sees."""

    unknown_field_message = "This field cannot be set through the API."

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        initial = self.initial_data if hasattr(self.initial_data, "keys") else {}
        unknown = sorted(set(initial) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: [self.unknown_field_message] for name in unknown}
            )
        return attrs


class WriteOnlySecretField(serializers.CharField):
    """A secret a request may set and no response shows; an empty or absent one keeps the saved
    one (the service drops it). Read back as a `SecretIsSetField`."""

    def __init__(self, *, max_length: int = 500, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "Write-only; empty or absent keeps the saved one.")
        super().__init__(
            max_length=max_length, required=False, allow_blank=True, write_only=True, **kwargs
        )


@extend_schema_field(OpenApiTypes.BOOL)
class SecretIsSetField(serializers.Field):
    """What is read back in a secret's stead: whether one is saved (`source` names it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Any) -> bool:
        return bool(value)
