"""API plumbing shared by every app: the one error shape, pagination, and the tenant-resolving base
view that every client-scoped endpoint inherits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError, connection
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from apps.core.exceptions import ApplicationError

if TYPE_CHECKING:
    from apps.clients.models import Client


def _error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    if fields:
        body["error"]["fields"] = fields
    return body


# A database outage answers 503 with this Retry-After (seconds): failovers take about as long.
DATABASE_RETRY_AFTER_SECONDS = 5


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every error leaves the API as {"error": {"code", "message", "fields"?}}."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database went away (restart, failover, a dropped connection): a JSON 503 the
        # caller can retry, never an HTML 500; the broken connection is dropped so the next
        # request opens a fresh one.
        if not connection.in_atomic_block:
            connection.close()
        unavailable = Response(
            _error_body(
                "unavailable",
                "The service is briefly unavailable; try again shortly.",
            ),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
        unavailable["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return unavailable
    if isinstance(exc, ApplicationError):
        fields = exc.extra.get("fields") if exc.extra else None
        refused = Response(_error_body(exc.code, exc.message, fields), status=exc.status)
        if exc.extra and exc.extra.get("retry_after"):  # a domain limit (e.g. e-mails sent)
            refused["Retry-After"] = str(int(exc.extra["retry_after"]))
        return refused
    if isinstance(exc, RequestDataTooBig):
        # Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE when the view reads it; left
        # alone it would become Django's HTML "Bad Request (400)".
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            _error_body("too_large", f"The request body is larger than {limit} bytes."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):  # too many fields, a malformed header, …
        return Response(
            _error_body("bad_request", "The request is malformed."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        fields = detail if isinstance(detail, dict) else {"non_field_errors": detail}
        first = _first_message(fields)
        response.data = _error_body("invalid", first or "Invalid input.", fields)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        response.data = _error_body(str(code), str(exc.detail))
    return response


def _first_message(fields: Any, prefix: str = "") -> str:
    if isinstance(fields, dict):
        for key, value in fields.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            msg = _first_message(value, path)
            if msg:
                return msg
    elif isinstance(fields, list):
        for item in fields:
            msg = _first_message(item, prefix)
            if msg:
                return msg
    elif fields:
        return f"{prefix}: {fields}" if prefix and prefix != "non_field_errors" else str(fields)
    return ""


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class TenantAPIView(APIView):
    """Base for every client-scoped endpoint: resolves the tenant once, in `initial()`, from the
    authenticated principal (API key or staff session + membership), through the one resolver
    (apps/api/resolver.py). Subclasses read
    `self.client`; they cannot reach a handler without one."""

    client: Client

    def validated_query(self, serializer_class: type[Any]) -> dict[str, Any]:
        """The query string validated by `serializer_class` (400 naming the bad parameter). An
        empty value (`?status=`, as an HTML form sends it) means "not given", like a missing one.
        """
        params = self.request.query_params
        data = {key: str(params[key]) for key in params if params[key] != ""}
        serializer = serializer_class(data=data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        from apps.api.resolver import resolver

        client = resolver.client(request)
        if client is None:
            raise exceptions.PermissionDenied("No client is associated with these credentials.")
        self.client = client


def error_response(
    code: str, message: str, http_status: int = status.HTTP_400_BAD_REQUEST
) -> Response:
    return Response(_error_body(code, message), status=http_status)
