"""The knowledge staff API (docs/api.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.permissions import MANAGE, StaffAPIView, acting_user
from apps.core.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    error_responses,
    parse_uuid,
    public_id_path_parameter,
)
from apps.knowledge.models import KnowledgeSource
from apps.knowledge.serializers import SourceSyncSerializer
from apps.knowledge.services.sync import source_sync_start

TAG = "knowledge"

# --- importing: start a source's sync -------------------------------------------------------

SOURCE_ID_PARAMETER = public_id_path_parameter("public_id", "The source's public id.")
SYNC_EXAMPLE: dict[str, Any] = {
    "id": "0b8f3c1e-6a2d-4d7e-9f10-2c5b7a9e1d34",
    "name": "Help centre",
    "kind": "sitemap",
    "status": "queued",
    "last_synced_at": "2026-03-01T03:00:12.000000Z",
    "error": "",
    "progress": {
        "done": 0,
        "total": 0,
        "bytes": 0,
        "created": 0,
        "updated": 0,
        "unchanged": 0,
        "failed": 0,
        "switched_off": 0,
        "message": "Waiting to sync.",
        "errors": [],
    },
}


def _source_or_404(client: Any, public_id: str) -> KnowledgeSource:
    parsed = parse_uuid(public_id)
    source = (
        KnowledgeSource.objects.for_client(client).filter(public_id=parsed).first()
        if parsed is not None
        else None
    )
    if source is None:
        raise exceptions.NotFound()
    return source


class SourceSyncApi(StaffAPIView):
    required_roles = {"POST": MANAGE}

    @extend_schema(
        operation_id="knowledge_sources_sync",
        tags=[TAG],
        summary="Sync a source now",
        description="Queues an import of the source (a web page, a sitemap or an uploaded "
        "file) and answers 202 with its status and progress; GET the source (or POST again: "
        "a source already queued or syncing is not queued twice) to follow `progress`. "
        "Pages whose text did not change are left alone; pages gone from a sitemap are "
        "switched off. 400 for a source typed in by staff or an address that may not be "
        'fetched (docs/knowledge.md, "Importing"). Needs the admin role.',
        parameters=[SOURCE_ID_PARAMETER, CLIENT_PARAMETER],
        request=None,
        responses={
            202: SourceSyncSerializer,
            **error_responses(400, *AUTH_ERRORS, 404),
        },
        examples=[
            OpenApiExample("Queued", value=SYNC_EXAMPLE, response_only=True, status_codes=["202"])
        ],
    )
    def post(self, request: Request, public_id: str) -> Response:
        source = _source_or_404(self.client, public_id)
        source = source_sync_start(source=source, user=acting_user(request))
        return Response(SourceSyncSerializer(source).data, status=status.HTTP_202_ACCEPTED)
