"""The console's "save as a test case" on a flagged answer (static/console/flags.js; included by
the console's URLconf). Needs the agent role; another client's flag answers 404."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from apps.api.permissions import SUPPORT, role_permits
from apps.console.access import ConsoleAccess, json_error, json_view
from apps.core.exceptions import ApplicationError
from apps.flags.selectors import flag_get
from apps.simulations.cases import simcase_from_flag


@require_POST
@json_view
def flag_simulation_case(request: HttpRequest, access: ConsoleAccess, flag_id: str) -> HttpResponse:
    if not role_permits(access.role, SUPPORT):
        return json_error(
            403, "permission_denied", _("This needs the %(role)s role.") % {"role": SUPPORT}
        )
    flag = flag_get(client=access.client, flag_id=flag_id)
    if flag is None:
        return json_error(404, "not_found", _("Not found."))
    try:
        case = simcase_from_flag(client=access.client, flag=flag)
    except ApplicationError as error:
        return json_error(error.status, error.code, error.message)
    return JsonResponse(
        {"case": {"id": str(case.public_id), "name": case.name, "suite": case.suite}}, status=201
    )
