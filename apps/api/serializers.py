"""Serializer bases shared by the API modules' request bodies."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


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
