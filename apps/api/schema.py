"""OpenAPI pieces shared by every API module: the error body, standard error responses, named
enums, the `?client=` parameter and how ids in URL paths are documented, parsed and looked up.

Kept apart from `apps.api.base` so that runtime plumbing does not depend on drf-spectacular.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Choices
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers

# ---------------------------------------------------------------------------------------------
# The one error shape (apps.api.base.exception_handler).
# ---------------------------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable machine-readable name: invalid, too_long, not_found, "
        "not_authenticated, authentication_failed, permission_denied, method_not_allowed …"
    )
    message = serializers.CharField(help_text="Human-readable; names the field when one is bad.")
    # (the serializer metaclass moves declared fields off the class, so this does not shadow
    # Serializer.fields)
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.JSONField(),
        required=False,
        help_text="Validation errors only: field name → its messages.",
    )


class ErrorSerializer(serializers.Serializer):
    """Every error response: `{"error": {"code", "message", "fields"?}}`."""

    error = ErrorDetailSerializer()


def _example(name: str, status: int, code: str, message: str, **extra: Any) -> OpenApiExample:
    body: dict[str, Any] = {"code": code, "message": message, **extra}
    return OpenApiExample(name, value={"error": body}, status_codes=[str(status)])


_ERRORS: dict[int, tuple[str, list[OpenApiExample]]] = {
    400: (
        "Invalid input; `error.fields` names each bad field.",
        [
            _example(
                "Invalid field",
                400,
                "invalid",
                "created_after: Date has wrong format. Use one of these formats instead: "
                "YYYY-MM-DD.",
                fields={"created_after": ["Date has wrong format."]},
            )
        ],
    ),
    401: (
        "No credentials, or a wrong, malformed or revoked API key.",
        [
            _example(
                "Not authenticated",
                401,
                "not_authenticated",
                "Authentication credentials were not provided.",
            )
        ],
    ),
    403: (
        "The credentials' role is too low for this operation, or no client is associated with "
        "them (a staff user without a membership, or with several and no `?client=`), or a "
        "staff session's write lacks its CSRF token.",
        [
            _example(
                "Role too low",
                403,
                "permission_denied",
                "This needs the agent role or higher; these credentials have the viewer role.",
            )
        ],
    ),
    404: (
        "No such object for this client (another client's object answers the same).",
        [_example("Not found", 404, "not_found", "Not found.")],
    ),
    413: (
        "The text is longer than the limit.",
        [
            _example(
                "Too long",
                413,
                "too_long",
                "text is longer than 4000 characters.",
                fields={"text": "At most 4000 characters."},
            )
        ],
    ),
    429: (
        "Too many requests; retry after the number of seconds in the `Retry-After` header.",
        [_example("Throttled", 429, "throttled", "Request was throttled.")],
    ),
    503: (
        "The database is briefly unreachable and nothing was stored; retry after the number of "
        "seconds in the `Retry-After` header.",
        [
            _example(
                "Unavailable",
                503,
                "unavailable",
                "The service is briefly unavailable; nothing was stored. Try again shortly.",
            )
        ],
    ),
}


def invalid_example(field: str, message: str) -> OpenApiExample:
    """A 400 example for one bad field."""
    return _example(
        f"Invalid {field}", 400, "invalid", f"{field}: {message}", fields={field: [message]}
    )


def error_responses(
    *statuses: int, invalid: OpenApiExample | None = None
) -> dict[int, OpenApiResponse]:
    """`responses=` entries for the given error statuses, each with the shared error body;
    `invalid` replaces the generic 400 example with the operation's own."""
    responses: dict[int, OpenApiResponse] = {}
    for status in statuses:
        description, examples = _ERRORS[status]
        if status == 400 and invalid is not None:
            examples = [invalid]
        responses[status] = OpenApiResponse(ErrorSerializer, description, examples=examples)
    return responses


# Errors every staff endpoint can answer with.
AUTH_ERRORS = (401, 403)


def write_responses(
    status: int, body: Any, field: str, message: str, *, not_found: bool = True
) -> dict[int, Any]:
    """`responses=` of an operation that takes a request body: `body` with `status`, or 400
    (its example: `field` rejected with `message`), 401, 403 and, unless not `not_found`, 404
    (the object, or one the body names, does not exist)."""
    errors = (400, *AUTH_ERRORS, 404) if not_found else (400, *AUTH_ERRORS)
    return {status: body, **error_responses(*errors, invalid=invalid_example(field, message))}


def conflict_response(
    description: str, *examples: tuple[str, str, str]
) -> dict[int, OpenApiResponse]:
    """`responses=` entry for an operation's own 409 (the object's state refuses it): what it
    means, and an example for each `(name, code, message)`."""
    return {
        409: OpenApiResponse(
            ErrorSerializer,
            description,
            examples=[_example(name, 409, code, message) for name, code, message in examples],
        )
    }


# ---------------------------------------------------------------------------------------------
# Named enums: each choice set becomes one schema component with a name we choose, so generated
# clients get stable types and spectacular never has to guess (and warn about) enum names.
# ---------------------------------------------------------------------------------------------


class NamedChoiceField(serializers.ChoiceField):
    """A ChoiceField documented as `#/components/schemas/<enum_name>`."""

    def __init__(
        self, *, choices: type[Choices] | Sequence[Any], enum_name: str, **kwargs: Any
    ) -> None:
        if isinstance(choices, type) and issubclass(choices, Choices):
            choices = choices.choices
        self.enum_name = enum_name
        super().__init__(choices=choices, **kwargs)


class NamedChoiceFieldExtension(OpenApiSerializerFieldExtension):
    target_class = NamedChoiceField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        field: NamedChoiceField = self.target
        values = list(field.choices)
        schema = {
            "type": "string",
            "enum": values,
            "description": "\n".join(
                f"* `{value}` - {label}" for value, label in field.choices.items()
            ),
        }
        component = ResolvedComponent(
            name=field.enum_name,
            type=ResolvedComponent.SCHEMA,
            object=field.enum_name,
            schema=schema,
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


def enum_values(choices: type[Choices]) -> list[str]:
    return [str(value) for value in choices.values]


def choice_parameter(name: str, choices: type[Choices], description: str) -> OpenApiParameter:
    """A query parameter that takes one of `choices` (a list's filter)."""
    return OpenApiParameter(
        name, OpenApiTypes.STR, enum=enum_values(choices), description=description
    )


def page_schema(
    serializer: type[serializers.Serializer],
    example: Any,
    *,
    invalid: OpenApiExample | None = None,
    filtered: bool = False,
) -> dict[str, Any]:
    """`extend_schema`'s `responses=` and `examples=` for a list endpoint that answers one page
    of `serializer`; one whose query can be invalid (`filtered`, or `invalid`: the 400 example)
    also answers 400."""
    errors = (400, *AUTH_ERRORS, 404) if filtered or invalid is not None else (*AUTH_ERRORS, 404)
    return {
        "responses": {200: serializer(many=True), **error_responses(*errors, invalid=invalid)},
        "examples": [OpenApiExample("A page", value=example, response_only=True)],
    }


# ---------------------------------------------------------------------------------------------
# Parameters shared by staff endpoints.
# ---------------------------------------------------------------------------------------------

CLIENT_PARAMETER = OpenApiParameter(
    "client",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="Staff sessions only: the slug of the client to act for, when the user is a "
    "member of several. Ignored for API keys (a key belongs to one client).",
)

# Ids in URL paths are matched as plain strings and parsed here, so a malformed id answers the
# API's JSON 404 instead of Django's HTML one, and an id too large for the database is simply
# not found instead of an overflow error.
_MAX_PK = 2**63 - 1


def parse_pk(value: str) -> int | None:
    """The positive integer primary key in `value`, or None when it cannot be one."""
    if not value.isascii() or not value.isdigit() or len(value) > len(str(_MAX_PK)):
        return None
    number = int(value)
    return number if 0 < number <= _MAX_PK else None


def parse_uuid(value: str) -> uuid.UUID | None:
    """The UUID in `value` (a public id), or None when it cannot be one."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return None


def found_or_404[T](found: T | None) -> T:
    """`found`, or the API's 404 when a lookup within the client found nothing: a missing object
    and another client's answer the same."""
    if found is None:
        raise exceptions.NotFound()
    return found


def found_by_public_id[T](lookup: Callable[..., T | None], value: str, **scope: Any) -> T:
    """What `lookup(public_id=…, **scope)` finds for the public id in `value` (from a URL path),
    or the API's 404: a malformed id is not found either, and never reaches the database."""
    public_id = parse_uuid(value)
    return found_or_404(lookup(public_id=public_id, **scope) if public_id is not None else None)


def id_path_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.INT64, OpenApiParameter.PATH, description=description
    )


def public_id_path_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.UUID, OpenApiParameter.PATH, description=description)


# ---------------------------------------------------------------------------------------------
# The standard operations of a resource.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceSchema:
    """How one resource of the API is documented: its operation ids (`<name>_<action>`, as DRF's
    router names them), its tag, the id in its paths and, for reading one, its body and example.
    Its methods are the `extend_schema` decorators of its operations, so each view states only
    what is its own: summary, description, request, responses, examples."""

    name: str
    tag: str
    id_parameter: OpenApiParameter
    serializer: type[serializers.Serializer] | None = None
    example: Any = None
    example_name: str = ""

    def operation(
        self,
        action: str,
        summary: str,
        description: str | None = None,
        *,
        member: bool = True,
        **kwargs: Any,
    ) -> Callable[[Any], Any]:
        """One operation; `member` ones (on one object) take its id in the path, and every one
        the `?client=` parameter, unless `parameters` says otherwise."""
        kwargs.setdefault(
            "parameters", [self.id_parameter, CLIENT_PARAMETER] if member else [CLIENT_PARAMETER]
        )
        return extend_schema(
            operation_id=f"{self.name}_{action}",
            tags=[self.tag],
            summary=summary,
            description=description,
            **kwargs,
        )

    def list_page(
        self,
        summary: str,
        description: str | None = None,
        *,
        serializer: type[serializers.Serializer] | None = None,
        example: Any = None,
        parameters: list[OpenApiParameter] | None = None,
        invalid: OpenApiExample | None = None,
        filtered: bool = False,
    ) -> Callable[[Any], Any]:
        """Listing the collection: one page of `serializer` (the resource's body unless given),
        as `page_schema` documents it; its query takes `parameters`, or only `?client=`."""
        body = serializer or self.serializer
        assert body is not None, f"{self.name}: a list needs a serializer"
        return self.operation(
            "list",
            summary,
            description,
            parameters=parameters or [CLIENT_PARAMETER],
            **page_schema(
                body,
                self.example if example is None else example,
                invalid=invalid,
                filtered=filtered,
            ),
        )

    def create(
        self,
        summary: str,
        description: str | None = None,
        *,
        request: Any,
        invalid: tuple[str, str],
        body: type[serializers.Serializer] | None = None,
        requests: Mapping[str, Any] | None = None,
        created: Any = None,
        created_name: str = "Created",
        not_found: bool = True,
        errors: Sequence[int] = (),
        action: str = "create",
        member: bool = False,
    ) -> Callable[[Any], Any]:
        """Adding to the collection: `request` validated (400: its example is the `invalid`
        pair of field and message), answered 201 with `body` (the resource's body unless given)
        and its example `created` (the resource's example unless given), named `created_name`.
        `requests` names each example request body; `not_found` as in `write_responses`;
        `errors` adds the operation's own error statuses besides those (413, 429 …). `action`
        and `member` name a create under one object (a conversation's notes)."""
        answered = body or self.serializer
        assert answered is not None, f"{self.name}: a create needs a serializer"
        field, message = invalid
        examples = [
            OpenApiExample(name, value=value, request_only=True)
            for name, value in (requests or {}).items()
        ]
        examples.append(
            OpenApiExample(
                created_name,
                value=self.example if created is None else created,
                response_only=True,
                status_codes=["201"],
            )
        )
        return self.operation(
            action,
            summary,
            description,
            member=member,
            request=request,
            responses={
                **write_responses(201, answered, field, message, not_found=not_found),
                **error_responses(*errors),
            },
            examples=examples,
        )

    def update(
        self,
        summary: str,
        description: str | None = None,
        *,
        request: Any,
        partial: bool = True,
        invalid: tuple[str, str] | None = None,
        body: type[serializers.Serializer] | None = None,
        requests: Mapping[str, Any] | None = None,
        updated: Any = None,
        updated_name: str = "Updated",
    ) -> Callable[[Any], Any]:
        """Changing one object (`partial`: the given fields, PATCH; else the whole of it, PUT):
        `request` validated (400: its example the `invalid` pair of field and message, or the
        generic one), answered 200 with `body` (the resource's body unless given) and, where
        given, its example `updated`, named `updated_name`; `requests` names each example
        request body."""
        answered = body or self.serializer
        assert answered is not None, f"{self.name}: an update needs a serializer"
        responses = (
            write_responses(200, answered, *invalid)
            if invalid is not None
            else {200: answered, **error_responses(400, *AUTH_ERRORS, 404)}
        )
        examples = [
            OpenApiExample(name, value=value, request_only=True)
            for name, value in (requests or {}).items()
        ]
        if updated is not None:
            examples.append(OpenApiExample(updated_name, value=updated, response_only=True))
        extra: dict[str, Any] = {"examples": examples} if examples else {}
        return self.operation(
            "partial_update" if partial else "update",
            summary,
            description,
            request=request,
            responses=responses,
            **extra,
        )

    def action(
        self,
        action: str,
        summary: str,
        description: str | None = None,
        *,
        body: type[serializers.Serializer] | None = None,
        answer: Any = None,
        answer_name: str = "",
        errors: Mapping[int, Any] | None = None,
    ) -> Callable[[Any], Any]:
        """An action on one object that takes no request body (resolve, stop, revoke …):
        answered 200 with `body` (the resource's body unless given) and, where given, its
        example `answer` named `answer_name`, or 404; `errors` adds the action's own error
        responses (a 409 …)."""
        answered = body or self.serializer
        assert answered is not None, f"{self.name}: an action needs a serializer"
        extra: dict[str, Any] = {}
        if answer is not None:
            extra["examples"] = [OpenApiExample(answer_name, value=answer, response_only=True)]
        return self.operation(
            action,
            summary,
            description,
            request=None,
            responses={200: answered, **error_responses(*AUTH_ERRORS, 404), **(errors or {})},
            **extra,
        )

    def retrieve(self, summary: str, description: str | None = None) -> Callable[[Any], Any]:
        """Reading one object: its body, or 404."""
        extra: dict[str, Any] = {}
        if self.example_name:
            example = OpenApiExample(self.example_name, value=self.example, response_only=True)
            extra["examples"] = [example]
        return self.operation(
            "retrieve",
            summary,
            description,
            responses={200: self.serializer, **error_responses(*AUTH_ERRORS, 404)},
            **extra,
        )

    def destroy(self, summary: str, description: str | None = None) -> Callable[[Any], Any]:
        """Deleting one object: 204, or 404."""
        return self.operation(
            "destroy",
            summary,
            description,
            responses={204: None, **error_responses(*AUTH_ERRORS, 404)},
        )
