"""The customer widget's HTTP API (docs/widget.md).

POST conversations                   → 201 {"id", "token"}
POST conversations/<id>/messages     → 201 {"message", "replies", "status"}  (body: "text",
                                       optional "confirm": the Yes/No buttons' answer)
                                       | 202 {"message", "replies": [], "pending": true}
GET  conversations/<id>/messages     → {"results": [visible messages], …}  (?after=<seq>)
GET  conversations/<id>/events       → text/event-stream: message, typing, status; bounded,
                                       resumable (Last-Event-ID / ?after=)
POST conversations/<id>/contact      → 200 {"email", "confirmed"}  (the customer's address for
                                       missed staff replies, used once confirmed by the link
                                       we e-mail; "" forgets it)
POST conversations/<id>/rating       → 201 | 200 {"score", "comment"}  (1–5 and an optional
                                       comment; one per conversation, a later one replaces it;
                                       only once the assistant or staff answered)
(all under /api/v1/widget/)

Authentication, origin rules and throttles live in `auth.py`, the request and response shapes
in `serializers.py`, the event stream in `streams.py`. The widget only ever sees visible
messages, serialized by `WidgetMessageSerializer`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from apps.api.resolver import resolver
from apps.api.schema import ErrorSerializer, error_responses
from apps.clients.identity import (
    IdentityError,
    identity_grant_issue,
    identity_grant_verify,
    identity_verify,
)
from apps.clients.models import Client
from apps.conversations.models import Conversation, ConversationStatus, Message
from apps.conversations.services import (
    conversation_contact_set,
    conversation_seen_record,
    conversation_start,
    customer_open_conversation,
    validate_customer_text,
)
from apps.outcomes.services import conversation_rate
from apps.platform.parsers import JSONParser
from apps.reasoning.models import TraceStatus
from apps.reasoning.selectors import turn_in_progress as widget_turn_in_progress
from apps.reasoning.selectors import turn_status as widget_turn_status
from apps.reasoning.services import handle_turn
from apps.widget.auth import (
    CORS_EXPOSE_HEADERS,
    WIDGET_KEY_HEADER,
    WidgetIPThrottle,
    WidgetKeyThrottle,
    WidgetMessageThrottle,
    WidgetNewConversationThrottle,
    WidgetRatingThrottle,
    widget_conversation_resolve,
    widget_token_window,
    widget_visitor,
)
from apps.widget.selectors import (
    widget_conversation_state,
    widget_message_jsons,
    widget_messages_after,
)
from apps.widget.serializers import (
    WidgetConfirmSerializer,
    WidgetContactOutSerializer,
    WidgetContactSerializer,
    WidgetConversationStartInSerializer,
    WidgetConversationStartOutSerializer,
    WidgetMessageInSerializer,
    WidgetMessageListOutSerializer,
    WidgetMessagePostOutSerializer,
    WidgetRatingInSerializer,
    WidgetRatingOutSerializer,
)
from apps.widget.streams import (
    MESSAGES_PAGE_LIMIT,
    STREAM_SECONDS,
    event_stream,
    event_stream_async,
)

logger = logging.getLogger(__name__)

# Requests bigger than this are refused before their body is parsed (a message is at most
# 4,000 characters; even fully \u-escaped that is well under it).
MAX_BODY_BYTES = 64 * 1024
# The largest `seq` a database integer column holds; a bigger `after` is nonsense, not a 500.
MAX_SEQ = 2_147_483_647


KEY_PARAMETER = OpenApiParameter(
    WIDGET_KEY_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    description="The client's public widget key (`wk_…`); `?key=` works too.",
)
TOKEN_PARAMETER = OpenApiParameter(
    "Authorization",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    description="`Bearer <token>` — the visitor token returned when the conversation started.",
)


# --------------------------------------------------------------------------------------------
# Base views
# --------------------------------------------------------------------------------------------


class WidgetAPIView(APIView):
    """Base of every widget endpoint. Order of checks: per-IP throttle (before any query; every
    request counts, failed ones too) → widget key (401/403) → origin (403) → the view's own
    checks. The per-key (tenant-wide) throttle is checked by the views right before real work,
    so failed requests never count against the tenant. There is no session or cookie here,
    hence no CSRF: every call carries its credentials explicitly."""

    authentication_classes = ()
    permission_classes = ()
    parser_classes = (JSONParser,)
    renderer_classes = (JSONRenderer,)
    throttle_classes = (WidgetIPThrottle,)
    client: Client

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        # Always JSON (errors of the event stream too): an EventSource's `Accept:
        # text/event-stream` must not turn a 401 into a 406.
        renderer = JSONRenderer()
        return renderer, renderer.media_type

    def get_authenticate_header(self, request: Request) -> str:
        # Without one, DRF would turn our 401s into 403s.
        return 'Bearer realm="guidedesk-widget"'

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # includes the per-IP throttle
        self.client = resolver.widget_client(request)

    def throttle(self, request: Request, *throttles: BaseThrottle) -> None:
        refused = [t for t in throttles if not t.allow_request(request, self)]
        if refused:
            waits = [w for w in (t.wait() for t in refused) if w is not None]
            raise exceptions.Throttled(max(waits) if waits else None)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # (`response` is a StreamingHttpResponse for the event stream; both have headers.)
        response = super().finalize_response(request, response, *args, **kwargs)
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["Access-Control-Expose-Headers"] = ", ".join(CORS_EXPOSE_HEADERS)
        return response


class WidgetConversationAPIView(WidgetAPIView):
    """A widget endpoint about one conversation: also needs the visitor token."""

    token_in_query = False  # only the event stream (EventSource cannot send headers)
    conversation: Conversation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.conversation = widget_conversation_resolve(
            request,
            client=self.client,
            conversation_id=str(kwargs.get("conversation_id", "")),
            allow_query=self.token_in_query,
        )


def _json_object(request: Request) -> dict[str, Any]:
    length = request.META.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        raise _too_large()
    data = request.data  # malformed JSON → ParseError → 400
    if not data:
        return {}
    if not isinstance(data, dict):
        raise exceptions.ParseError("The body must be a JSON object.")
    return dict(data)


def _too_large() -> exceptions.APIException:
    exc = exceptions.APIException(
        f"The request body is larger than {MAX_BODY_BYTES} bytes.", code="too_large"
    )
    exc.status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    return exc


def _seq_param(value: str | None, field: str) -> int:
    if value is None or value == "":
        return 0
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_SEQ:
        raise exceptions.ValidationError({field: ["Must be a non-negative integer."]})
    return int(value)


def _confirm(value: Any) -> dict[str, Any] | None:
    """The Yes/No buttons' structured answer, validated (None when absent). Whether it settles
    anything is the confirmation rule's call (`guards.confirmation_decision`), in the turn."""
    if value is None:
        return None
    body = WidgetConfirmSerializer(data=value)
    if not body.is_valid():
        raise exceptions.ValidationError({"confirm": body.errors})
    data = body.validated_data
    return {"action": data["action"], "digest": data["digest"].lower(), "answer": data["answer"]}


def _serialize(messages: list[Message]) -> list[dict[str, Any]]:
    return widget_message_jsons(messages)  # = WidgetMessageSerializer's JSON, cheaper


# --------------------------------------------------------------------------------------------
# Endpoints
# --------------------------------------------------------------------------------------------


class WidgetConversationStartApi(WidgetAPIView):
    """Start a conversation for a visitor; the token it returns authenticates every later call
    about this conversation (shown once, stored hashed)."""

    @extend_schema(
        summary="Start a conversation",
        description=(
            "201 with the conversation and its token. With a signed identity (`customer_id` + "
            "`user_hash`, `identity_token` or `identity_grant`) a verified customer's open "
            "conversation may be resumed (`resumed: true`); a bad signature starts an "
            "unverified one and says why in `identity.error`. `resume_only: true` creates "
            "nothing: 200 with `id` null when there is nothing to resume."
        ),
        tags=["widget"],
        auth=[],
        parameters=[KEY_PARAMETER],
        request=WidgetConversationStartInSerializer,
        responses={
            200: WidgetConversationStartOutSerializer,
            201: WidgetConversationStartOutSerializer,
            **error_responses(400, 401, 403, 429),
        },
    )
    def post(self, request: Request) -> Response:
        self.throttle(request, WidgetNewConversationThrottle())
        body = WidgetConversationStartInSerializer(data=_json_object(request))
        body.is_valid(raise_exception=True)
        self.throttle(request, WidgetKeyThrottle())  # real work: counts against the tenant
        data = body.validated_data
        identity, error = None, None
        signed = ("identity_token", "customer_id", "user_hash", "identity_grant")
        if any(data.get(name) for name in signed):
            try:
                if data.get("identity_grant"):
                    identity = identity_grant_verify(
                        client=self.client, grant=data["identity_grant"]
                    )
                else:
                    identity = identity_verify(
                        client=self.client,
                        customer_id=data.get("customer_id", ""),
                        user_hash_hex=data.get("user_hash", ""),
                        token=data.get("identity_token", ""),
                    )
            except IdentityError as exc:
                # Never trusted, never a 500: the visitor chats as an anonymous one.
                error = exc.code
                logger.info("widget: identity not verified (%s)", exc.detail)
        identity_out: dict[str, Any] = {
            "verified": identity is not None,
            "customer_id": identity.customer_id if identity else "",
            "error": error,
        }
        if identity is not None:
            identity_out["grant"] = identity_grant_issue(client=self.client, identity=identity)
        if data.get("resume_only"):
            found = (
                customer_open_conversation(client=self.client, customer_id=identity.customer_id)
                if identity is not None
                else None
            )
            if found is None:  # nothing to resume: nothing is created
                return Response(
                    {"id": None, "token": None, "resumed": False, "identity": identity_out}
                )
        conversation, token, resumed = conversation_start(
            client=self.client,
            visitor_id=data.get("visitor_id", ""),
            identity=identity,
            resume=not data.get("new"),
            language=data.get("language", ""),
        )
        return Response(
            {
                "id": str(conversation.public_id),
                "token": token,
                "resumed": resumed,
                "identity": identity_out,
            },
            status=status.HTTP_201_CREATED,
        )


class WidgetMessagesApi(WidgetConversationAPIView):
    """A conversation's visible messages, and the customer's new ones."""

    @extend_schema(
        summary="Visible messages after a sequence number",
        tags=["widget"],
        auth=[],
        parameters=[
            KEY_PARAMETER,
            TOKEN_PARAMETER,
            OpenApiParameter(
                "after",
                OpenApiTypes.INT,
                description=(
                    "Only messages with a higher `seq`. It also tells GuideDesk the widget has "
                    "displayed every message up to it (staff replies not displayed within "
                    "WIDGET_REPLY_EMAIL_DELAY_SECONDS are e-mailed to the customer's address)."
                ),
            ),
        ],
        responses={
            200: WidgetMessageListOutSerializer,
            **error_responses(400, 401, 403, 404, 429),
        },
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        after = _seq_param(request.query_params.get("after"), "after")
        # Asking for the messages after `after` says the widget has displayed those up to it:
        # what "seen" means for the e-mail of missed staff replies (docs/widget.md).
        conversation_seen_record(client=self.client, conversation=self.conversation, seq=after)
        found = widget_messages_after(
            client=self.client,
            conversation_id=self.conversation.pk,
            after=after,
            limit=MESSAGES_PAGE_LIMIT + 1,
        )
        return Response(
            {
                "results": _serialize(found[:MESSAGES_PAGE_LIMIT]),
                "has_more": len(found) > MESSAGES_PAGE_LIMIT,
                "status": self.conversation.status,
                "typing": self.conversation.status == ConversationStatus.OPEN
                and widget_turn_in_progress(
                    client=self.client, conversation_id=self.conversation.pk
                ),
                "contact_confirmed": bool(self.conversation.contact_email)
                and self.conversation.contact_email_confirmed_at is not None,
                "language": self.conversation.language,
            }
        )

    @extend_schema(
        summary="Send the customer's message",
        description=(
            "201 when the turn finished within the request (replies included); 202 with "
            "`pending: true` when a worker will answer — replies then arrive on the event "
            "stream or via GET …/messages. 503 (JSON, with `Retry-After`) when the database "
            "is unreachable and the message could not be stored: send it again."
        ),
        tags=["widget"],
        auth=[],
        parameters=[KEY_PARAMETER, TOKEN_PARAMETER],
        request=WidgetMessageInSerializer,
        responses={
            201: WidgetMessagePostOutSerializer,
            202: WidgetMessagePostOutSerializer,
            **error_responses(400, 401, 403, 404, 413, 429, 503),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        self.throttle(request, WidgetMessageThrottle())
        data = _json_object(request)
        if "text" not in data:
            raise exceptions.ValidationError({"text": ["This field is required."]})
        text = validate_customer_text(data["text"])  # 400 / 413, naming `text`
        confirm = _confirm(data.get("confirm"))  # 400 naming `confirm`
        self.throttle(request, WidgetKeyThrottle())  # real work: counts against the tenant
        # Over its conversation's or address's token window the message is still stored, and
        # its turn hands it to staff with a notice instead of calling the model (docs/widget.md).
        reached = widget_token_window(request, client=self.client, conversation=self.conversation)
        # A database error before the message is stored answers a JSON 503 (the shared handler);
        # once it is stored, the customer gets 201/202 with it whatever happens next. The turn
        # charges this visitor's daily budget and token windows (docs/billing.md).
        message = handle_turn(
            client=self.client,
            conversation=self.conversation,
            text=text,
            confirm=confirm,
            token_window=reached.as_data() if reached is not None else None,
            visitor=widget_visitor(request),
        )
        pending = Response(
            {
                "message": _serialize([message])[0],
                "replies": [],
                "pending": True,
                "language": self.conversation.language,
            },
            status=status.HTTP_202_ACCEPTED,
        )
        # handle_turn leaves the status the message was stored under on the instance: only an
        # open conversation's message is queued for the assistant.
        queued = self.conversation.status == ConversationStatus.OPEN
        if queued and message.turn_queued:
            return pending  # a worker has it: its replies arrive on the event stream
        try:
            turn_status = widget_turn_status(client=self.client, message=message)
            if queued and turn_status in (None, TraceStatus.PROCESSING):
                return pending
            state = widget_conversation_state(
                client=self.client, conversation_id=message.conversation_id
            )
            replies = widget_messages_after(
                client=self.client,
                conversation_id=message.conversation_id,
                after=message.seq,
                limit=MESSAGES_PAGE_LIMIT,
            )
        except (OperationalError, InterfaceError):
            # Stored, but the database went away while reading the replies: they arrive on
            # the event stream (or GET …/messages) once it is back.
            logger.warning("widget: database error after storing a message", exc_info=True)
            return pending
        return Response(
            {
                "message": _serialize([message])[0],
                "replies": _serialize(replies),
                "status": state.status if state else self.conversation.status,
                "language": self.conversation.language,
            },
            status=status.HTTP_201_CREATED,
        )


class WidgetContactApi(WidgetConversationAPIView):
    """The address the customer leaves (asked during a hand-off) so staff replies they do not
    see in the chat are e-mailed to them."""

    @extend_schema(
        summary="Leave an e-mail address for missed staff replies",
        description=(
            "Optional. A new address gets a one-click confirmation e-mail (the link is valid "
            "WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS, default 48); once confirmed, staff replies the "
            "widget has not displayed within WIDGET_REPLY_EMAIL_DELAY_SECONDS (default 3 minutes) "
            'are e-mailed to it, one e-mail per batch. `""` forgets the address. Throttled like '
            "posting a message; at most WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR (default 3) "
            "confirmation e-mails per address and per conversation an hour (429 naming `email`)."
        ),
        tags=["widget"],
        auth=[],
        parameters=[KEY_PARAMETER, TOKEN_PARAMETER],
        request=WidgetContactSerializer,
        responses={
            200: WidgetContactOutSerializer,
            **error_responses(400, 401, 403, 404, 413, 429),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        self.throttle(request, WidgetMessageThrottle())
        data = _json_object(request)
        if "email" not in data:
            raise exceptions.ValidationError({"email": ["This field is required."]})
        self.throttle(request, WidgetKeyThrottle())  # real work: counts against the tenant
        conversation = conversation_contact_set(
            client=self.client,
            conversation=self.conversation,
            email=data["email"],
            site=request.build_absolute_uri("/"),  # GuideDesk's own origin (the iframe's)
        )
        return Response(
            {
                "email": conversation.contact_email,
                "confirmed": conversation.contact_email_confirmed_at is not None,
            }
        )


class WidgetEventsApi(WidgetConversationAPIView):
    """The conversation's live events as server-sent events."""

    token_in_query = True

    @extend_schema(
        summary="Live events (server-sent events)",
        description=(
            "A `text/event-stream` of `message` (a visible message; `id:` is its `seq`), "
            '`typing` (`{"typing": bool}`) and `status` (`{"status": …}`) events. The stream '
            f"ends after about {int(STREAM_SECONDS)} s with a `retry:` hint; reconnect with the "
            "`Last-Event-ID` header (EventSource does this) or `?after=<seq>`. `?key=` and "
            "`?token=` stand in for the headers, which EventSource cannot send."
        ),
        tags=["widget"],
        auth=[],
        parameters=[
            OpenApiParameter("key", OpenApiTypes.STR, description="The widget key."),
            OpenApiParameter("token", OpenApiTypes.STR, description="The visitor token."),
            OpenApiParameter("after", OpenApiTypes.INT, description="Resume after this seq."),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The event stream."
            ),
            **error_responses(400, 401, 403, 404, 429),
        },
    )
    def get(self, request: Request, conversation_id: str) -> StreamingHttpResponse:
        # EventSource resends the original URL on reconnect, so its Last-Event-ID wins.
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id:
            after = _seq_param(last_event_id, "Last-Event-ID")
        else:
            after = _seq_param(request.query_params.get("after"), "after")
        stream: Iterator[str] | AsyncIterator[str]
        if isinstance(request._request, ASGIRequest):  # served by uvicorn: no thread is held
            stream = event_stream_async(
                client=self.client, conversation_id=self.conversation.pk, after=after
            )
        else:
            stream = event_stream(
                client=self.client, conversation_id=self.conversation.pk, after=after
            )
        response = StreamingHttpResponse(stream, content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache, no-store"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event through at once
        return response


class WidgetRatingApi(WidgetConversationAPIView):
    """The customer's rating of the conversation (CSAT, docs/outcomes.md): a 1–5 score and an
    optional comment. One per conversation (a later one replaces it), only once the assistant
    or staff answered, and at most THROTTLE_WIDGET_RATINGS per visitor."""

    @extend_schema(
        summary="Rate the conversation",
        description=(
            'Body: `{"score": 1-5, "comment": "optional, at most 1000 characters"}`. 201 the '
            "first time, 200 when it replaces the conversation's earlier rating (the stored "
            "rating is returned); 409 `nothing_to_rate` before the assistant or staff answered. "
            "429 with Retry-After past `widget_ratings` ratings per visitor (all their "
            "conversations of this client together)."
        ),
        tags=["widget"],
        auth=[],
        parameters=[KEY_PARAMETER, TOKEN_PARAMETER],
        request=WidgetRatingInSerializer,
        responses={
            200: WidgetRatingOutSerializer,
            201: WidgetRatingOutSerializer,
            **error_responses(400, 401, 403, 404, 413, 429),
            409: OpenApiResponse(ErrorSerializer, description="Nothing to rate yet."),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        self.throttle(request, WidgetMessageThrottle())
        data = _json_object(request)
        if "score" not in data:
            raise exceptions.ValidationError({"score": ["This field is required."]})
        # Per visitor over all their conversations, so starting many cannot stuff the figures.
        self.throttle(request, WidgetRatingThrottle())
        self.throttle(request, WidgetKeyThrottle())  # real work: counts against the tenant
        rating, created = conversation_rate(
            client=self.client,
            conversation=self.conversation,
            score=data["score"],
            comment=data.get("comment"),
        )
        return Response(
            {"score": rating.score, "comment": rating.comment},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
