"""Staff / back-office reply templates API (docs/api.md, "Reply templates"): list them (filled in
for one conversation when asked), and create, change and delete them (the admin role)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, StaffAPIView, acting_user
from apps.api.schema import (
    CLIENT_PARAMETER,
    ResourceSchema,
    public_id_path_parameter,
)
from apps.api.serializers import validated_body
from apps.conversations.selectors import conversation_get
from apps.escalations.models import TEMPLATE_BODY_MAX_CHARS, ReplyTemplate
from apps.escalations.reply_templates import (
    reply_template_create,
    reply_template_delete,
    reply_template_get,
    reply_template_list,
    reply_template_update,
    template_render,
    template_values,
)

TAG = "reply-templates"


class ReplyTemplateSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = serializers.CharField(max_length=80)
    shortcut = serializers.SlugField(max_length=40)
    body = serializers.CharField(max_length=TEMPLATE_BODY_MAX_CHARS, trim_whitespace=False)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)


class FilledTemplateSerializer(ReplyTemplateSerializer):
    text = serializers.CharField(
        read_only=True,
        help_text="The body filled in for the conversation asked for (`?conversation=`); "
        "absent without one.",
    )
    missing = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Variables with no value for that conversation, left in `text` as {name}.",
    )


class TemplateFilterSerializer(serializers.Serializer):
    conversation = serializers.UUIDField(required=False)


TEMPLATE_EXAMPLE: dict[str, Any] = {
    "id": "5f0e7a52-3c1d-4d8e-9b6a-0a1b2c3d4e5f",
    "name": "Refund sent",
    "shortcut": "refund-sent",
    "body": "Hi {customer_name}, the refund for order {order_id} is on its way. — {agent_name}",
    "created_at": "2026-03-02T09:16:40.004000Z",
    "updated_at": "2026-03-02T09:16:40.004000Z",
}
TEMPLATE_ID_PARAMETER = public_id_path_parameter("template_id", "The template's public id.")


def _template_or_404(view: StaffAPIView, template_id: str) -> ReplyTemplate:
    template = reply_template_get(client=view.client, template_id=template_id)
    if template is None:
        raise exceptions.NotFound("No such reply template.")
    return template


TEMPLATES = ResourceSchema(
    "reply_templates",
    TAG,
    TEMPLATE_ID_PARAMETER,
    serializer=ReplyTemplateSerializer,
    example=TEMPLATE_EXAMPLE,
    example_name="A template",
)


class ReplyTemplateListApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": MANAGE}

    @TEMPLATES.list_page(
        "List reply templates",
        "The client's reply templates by name. With `?conversation=<id>` each also "
        "carries `text`, its body filled in for that conversation and for the caller "
        "(`{agent_name}`), and `missing`, the variables that had no value. Needs the viewer "
        "role.",
        parameters=[
            OpenApiParameter(
                "conversation",
                OpenApiTypes.UUID,
                description="Fill the templates in for this conversation.",
            ),
            CLIENT_PARAMETER,
        ],
        serializer=FilledTemplateSerializer,
        example={
            **TEMPLATE_EXAMPLE,
            "text": "Hi {customer_name}, the refund for order TH-10042 is on its way. — Sam",
            "missing": ["customer_name"],
        },
        filtered=True,
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(TemplateFilterSerializer)
        templates = reply_template_list(client=self.client)
        if "conversation" not in filters:
            return self.paginated_response(templates, ReplyTemplateSerializer)
        conversation = conversation_get(client=self.client, public_id=str(filters["conversation"]))
        if conversation is None:
            raise exceptions.NotFound("No such conversation.")
        values = template_values(
            client=self.client, conversation=conversation, user=acting_user(request)
        )
        rows = []
        for template in templates:
            rendered = template_render(body=template.body, values=values)
            template.text, template.missing = rendered.text, rendered.missing  # type: ignore[attr-defined]
            rows.append(template)
        return self.paginated_response(rows, FilledTemplateSerializer)

    @TEMPLATES.create(
        "Create a reply template",
        "A new template. The body may use {customer_name}, {order_id} and "
        "{agent_name}; any other {name}, or a lone brace, is refused (400 naming `body`); "
        "`{{` and `}}` are literal braces. The shortcut is unique within the client. Needs the "
        "admin role.",
        request=ReplyTemplateSerializer,
        invalid=(
            "body",
            "Unknown variable {order}. Known: {customer_name}, {order_id}, {agent_name}.",
        ),
        requests={"New": {k: TEMPLATE_EXAMPLE[k] for k in ("name", "shortcut", "body")}},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(ReplyTemplateSerializer, request)
        template = reply_template_create(client=self.client, **body)
        return Response(ReplyTemplateSerializer(template).data, status=status.HTTP_201_CREATED)


class ReplyTemplateDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PATCH": MANAGE, "DELETE": MANAGE}

    @TEMPLATES.retrieve("Read a reply template", "One template. Needs the viewer role.")
    def get(self, request: Request, template_id: str) -> Response:
        return Response(ReplyTemplateSerializer(_template_or_404(self, template_id)).data)

    @TEMPLATES.update(
        "Change a reply template",
        "Changes the given fields, validated as on create. Needs the admin role.",
        request=ReplyTemplateSerializer(partial=True),
        requests={"Rename": {"name": "Refund on its way"}},
        updated=TEMPLATE_EXAMPLE,
        updated_name="Changed",
    )
    def patch(self, request: Request, template_id: str) -> Response:
        template = _template_or_404(self, template_id)
        changes = validated_body(ReplyTemplateSerializer, request, partial=True)
        template = reply_template_update(client=self.client, template=template, changes=changes)
        return Response(ReplyTemplateSerializer(template).data)

    @TEMPLATES.destroy(
        "Delete a reply template",
        "Deletes the template. Replies already sent with it stay as they are. "
        "Needs the admin role.",
    )
    def delete(self, request: Request, template_id: str) -> Response:
        reply_template_delete(client=self.client, template=_template_or_404(self, template_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
