"""POST /api/v1/flags/<id>/simulation-case — save a flagged answer's conversation as a test case
(docs/api.md, "Flags and teaching")."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import SUPPORT, StaffAPIView
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    error_responses,
    public_id_path_parameter,
)
from apps.flags.selectors import flag_get
from apps.simulations.apis import CASE_EXAMPLE
from apps.simulations.cases import simcase_from_flag
from apps.simulations.serializers import SimCaseSerializer


class FlagSimulationCaseApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @extend_schema(
        operation_id="flags_simulation_case",
        tags=["flags"],
        summary="Save a flagged conversation as a test case",
        description="Makes (or, asked again, refreshes) the simulation case `flagged-<id>` in "
        "the suite `flagged`: the conversation's visible history up to the customer's message "
        "the flagged reply answered, that message as the turn, and judged criteria from the "
        "correction. No request body. Needs the agent role.",
        parameters=[public_id_path_parameter("flag_id", "The flag's id."), CLIENT_PARAMETER],
        request=None,
        responses={201: SimCaseSerializer, **error_responses(400, *AUTH_ERRORS, 404)},
        examples=[OpenApiExample("Saved", value=CASE_EXAMPLE, response_only=True)],
    )
    def post(self, request: Request, flag_id: str) -> Response:
        flag = flag_get(client=self.client, flag_id=flag_id)
        if flag is None:
            raise exceptions.NotFound("No such flag.")
        case = simcase_from_flag(client=self.client, flag=flag)
        return Response(SimCaseSerializer(case).data, status=status.HTTP_201_CREATED)
