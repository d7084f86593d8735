"""The console's reply-template picker: the client's templates filled in for one conversation
and the signed-in staff member (static/console/templates.js asks for them when the picker opens;
docs/api.md, "Reply templates")."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from apps.console.access import ConsoleAccess, json_error, json_view
from apps.conversations.selectors import conversation_get
from apps.escalations.reply_templates import reply_template_list, template_render, template_values


@require_GET
@json_view
def conversation_templates(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        return json_error(404, "not_found", _("Not found."))
    values = template_values(client=access.client, conversation=conversation, user=request.user)
    rows = []
    for template in reply_template_list(client=access.client):
        rendered = template_render(body=template.body, values=values)
        rows.append(
            {
                "id": str(template.public_id),
                "name": template.name,
                "shortcut": template.shortcut,
                "text": rendered.text,
                "missing": rendered.missing,
            }
        )
    return JsonResponse({"templates": rows})
