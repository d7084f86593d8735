"""Staff / back-office notes API: read, write, approve and archive the client's cross-session
notes, and export / import them as JSON Lines (docs/api.md "Notes")."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import exceptions, status
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    ResourceSchema,
    choice_parameter,
    error_responses,
    found_or_404,
    id_path_parameter,
    invalid_example,
    parse_pk,
)
from apps.api.serializers import validated_body
from apps.core.exceptions import ApplicationError
from apps.notes.maintenance import (
    note_delete,
    note_get,
    notes_export_lines,
    notes_import,
    notes_list,
    notes_parse_lines,
)
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.serializers import (
    NoteFilterSerializer,
    NoteImportResultSerializer,
    NoteSerializer,
    NoteUpdateSerializer,
    NoteWriteSerializer,
)
from apps.notes.services import note_add, note_set_status, note_update
from apps.platform.parsers import read_body

TAG = "notes"
JSON_LINES = "application/x-ndjson"
# Accepted on import besides application/x-ndjson (the JSON Lines site's own name for it).
JSON_LINES_ALIASES = ("application/jsonl",)


class JSONLinesParser(BaseParser):
    """The raw JSON Lines body as text; each line is parsed and validated by the import."""

    media_type = JSON_LINES

    def parse(  # type: ignore[override]  # the text, not a mapping: the import parses lines
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> str:
        raw = read_body(stream) if stream is not None else b""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise exceptions.ParseError("The body is not valid UTF-8.") from exc


class JSONLinesAliasParser(JSONLinesParser):
    media_type = JSON_LINES_ALIASES[0]


class JSONLinesRenderer(BaseRenderer):
    """Lets a caller ask for the export with `Accept: application/x-ndjson`; the export itself
    is streamed by the view, and anything else (an error) is rendered as JSON."""

    media_type = JSON_LINES
    format = "jsonl"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        return JSONRenderer().render(data, "application/json", renderer_context)


NOTE_EXAMPLE: dict[str, Any] = {
    "id": 412,
    "type": "failure",
    "content": "A request for information went to tool lookup_order (read): it failed (timed out).",
    "language": "en",
    "ref": "lookup_order",
    "confidence": None,
    "source": "ai",
    "status": "active",
    "hits": 3,
    "session_id": "20260302_091500_4242_517",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "turn": 881,
    "reviewed_by": None,
    "reviewed_at": None,
    "created_at": "2026-03-02T09:16:40.004000Z",
    "updated_at": "2026-03-02T11:02:10.120000Z",
}
EXPORT_LINE_EXAMPLE = (
    '{"type": "tip", "content": "Quote the order code back to the customer.", "language": "", '
    '"ref": "", "confidence": 0.9, "session_id": "20260302_091500_4242_517", "source": "staff", '
    '"status": "active", "hits": 1, "created_at": "2026-03-02T09:16:40.004000+00:00", '
    '"content_hash": "9f2c…"}\n'
)
NOTE_ID_PARAMETER = id_path_parameter("note_id", "The note's id.")
LIST_PARAMETERS = [
    OpenApiParameter(
        "q",
        OpenApiTypes.STR,
        description="Full-text search in the content (PostgreSQL full-text search; a plain "
        "substring match on SQLite), best matches first.",
    ),
    choice_parameter("type", NoteType, "Only this type."),
    choice_parameter("status", NoteStatus, "Only this status."),
    OpenApiParameter(
        "language",
        OpenApiTypes.STR,
        description="Only notes for this language (exactly; use the list without it to see "
        "the notes for any language too).",
    ),
    CLIENT_PARAMETER,
]


NOTES = ResourceSchema(
    "notes",
    TAG,
    NOTE_ID_PARAMETER,
    serializer=NoteSerializer,
    example=NOTE_EXAMPLE,
    example_name="A note",
)


def _note_or_404(client: Any, note_id: str) -> Note:
    pk = parse_pk(note_id)
    return found_or_404(note_get(client=client, note_id=pk) if pk is not None else None)


def _fresh(client: Any, note: Note) -> dict[str, Any]:
    return dict(NoteSerializer(note_get(client=client, note_id=note.pk)).data)


class NoteListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @NOTES.list_page(
        "List notes",
        "The client's cross-session notes, newest first (best matches first with "
        "`q`), one page at a time: what the assistant learnt (source `ai`), what staff wrote "
        "(`staff`) and what insights proposed (`insight`). Only `active` notes reach prompts; "
        "`pending_review` ones wait for a person. Needs the viewer role.",
        parameters=LIST_PARAMETERS,
        invalid=invalid_example("type", '"hint" is not a valid choice.'),
    )
    def get(self, request: Request) -> Response:
        return self.list_response(notes_list, NoteSerializer, filters=NoteFilterSerializer)

    @NOTES.create(
        "Write a note",
        "Adds a staff note (source `staff`), active at once unless `status` is "
        "`pending_review`. The same type, ref and content written again within a day is not "
        "duplicated: the existing note's `hits` goes up and it is returned (still 201). "
        "Needs the agent role.",
        request=NoteWriteSerializer,
        invalid=("content", "This field is required."),
        requests={
            "A tip": {
                "type": "tip",
                "content": "Quote the order code back to the customer.",
                "language": "en",
            }
        },
        created={**NOTE_EXAMPLE, "source": "staff", "type": "tip"},
    )
    def post(self, request: Request) -> Response:
        data = validated_body(NoteWriteSerializer, request)
        wanted = data.pop("status", None) or NoteStatus.ACTIVE
        if wanted == NoteStatus.ARCHIVED:
            raise ApplicationError(
                "status: a new note is active or pending_review.",
                extra={"fields": {"status": ["A new note is active or pending_review."]}},
            )
        note = note_add(client=self.client, source=NoteSource.STAFF, status=wanted, **data)
        return Response(_fresh(self.client, note), status=status.HTTP_201_CREATED)


class NoteDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PATCH": SUPPORT, "DELETE": SUPPORT}

    @NOTES.retrieve("Read a note", "One note. Needs the viewer role.")
    def get(self, request: Request, note_id: str) -> Response:
        return Response(NoteSerializer(_note_or_404(self.client, note_id)).data)

    @NOTES.update(
        "Edit, approve or archive a note",
        "Changes the given fields. `status: active` approves a note waiting for "
        "review (it reaches prompts from the next turn on); `status: archived` takes it out of "
        "prompts; both record who did it. `source`, `hits`, ids and timestamps cannot be "
        "changed (a 400 naming the field). Needs the agent role.",
        request=NoteUpdateSerializer,
        invalid=("source", "This field cannot be set through the API."),
        requests={"Approve": {"status": "active"}},
        updated=NOTE_EXAMPLE,
    )
    def patch(self, request: Request, note_id: str) -> Response:
        note = _note_or_404(self.client, note_id)
        changes = validated_body(NoteUpdateSerializer, request)
        wanted = changes.pop("status", None)
        if changes:
            note = note_update(note=note, **changes)
        if wanted is not None and wanted != note.status:
            note = note_set_status(note=note, status=wanted, by=acting_user(request))
        return Response(_fresh(self.client, note))

    @NOTES.destroy(
        "Delete a note",
        "Deletes the note for good (archive it instead to keep it for the record). "
        "Needs the agent role.",
    )
    def delete(self, request: Request, note_id: str) -> Response:
        note_delete(client=self.client, note=_note_or_404(self.client, note_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class NoteExportApi(StaffAPIView):
    required_roles = {"GET": READ}
    renderer_classes = [JSONRenderer, JSONLinesRenderer]

    @NOTES.operation(
        "export",
        "Export notes (JSON Lines)",
        "Every note of the client, oldest first, as JSON Lines "
        f"(`{JSON_LINES}`): one JSON object per line with `type`, `content`, `language`, "
        "`ref`, `confidence`, `session_id`, `source`, `status`, `hits`, `created_at`, "
        "`content_hash`. Streamed, so any number of notes can be exported. Feed the file "
        "back to the import to restore or copy them. Needs the viewer role.",
        member=False,
        responses={
            (200, JSON_LINES): OpenApiResponse(
                OpenApiTypes.STR,
                description="One note per line.",
                examples=[OpenApiExample("Two lines", value=EXPORT_LINE_EXAMPLE * 2)],
            ),
            **error_responses(*AUTH_ERRORS, 404),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        response = StreamingHttpResponse(
            notes_export_lines(client=self.client), content_type=f"{JSON_LINES}; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="notes-{self.client.slug}.jsonl"'
        return response

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Errors stay JSON even when JSON Lines was asked for.
        if isinstance(response, Response) and isinstance(
            getattr(request, "accepted_renderer", None), JSONLinesRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class NoteImportApi(StaffAPIView):
    required_roles = {"POST": MANAGE}
    parser_classes = [JSONLinesParser, JSONLinesAliasParser]

    @NOTES.operation(
        "import",
        "Import notes (JSON Lines)",
        f"Adds notes from a JSON Lines body (`Content-Type: {JSON_LINES}`), in the "
        "export's format: one object per line; `type` and `content` are required, the other "
        "fields optional (`source` defaults to `staff`, `status` to `active`; `created_at` "
        "keeps the note's age; `content_hash` is recomputed). Every line is validated first: "
        "any error and nothing is imported, and the 400 names each bad line and field "
        "(`error.fields.lines`: [{`line`, `field`, `message`}]). Idempotent: a line whose "
        "type, ref and content the client already holds is skipped, so importing the same "
        "file twice adds nothing. At most "
        f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes per request. Needs the admin role.",
        member=False,
        request={JSON_LINES: OpenApiTypes.STR},
        responses={
            200: NoteImportResultSerializer,
            **error_responses(
                400,
                *AUTH_ERRORS,
                404,
                413,
                invalid=OpenApiExample(
                    "Bad line",
                    value={
                        "error": {
                            "code": "invalid",
                            "message": "line 3, type: Input should be 'success', 'failure', "
                            "'pattern', 'strategy' or 'tip'",
                            "fields": {
                                "lines": [
                                    {
                                        "line": 3,
                                        "field": "type",
                                        "message": "Input should be 'success', 'failure', "
                                        "'pattern', 'strategy' or 'tip'",
                                    }
                                ]
                            },
                        }
                    },
                    status_codes=["400"],
                ),
            ),
        },
        examples=[
            OpenApiExample("Imported", value={"created": 41, "skipped": 2}, response_only=True)
        ],
    )
    def post(self, request: Request) -> Response:
        text = request.data if isinstance(request.data, str) else ""
        lines = notes_parse_lines(text)
        result = notes_import(client=self.client, lines=lines)
        return Response(NoteImportResultSerializer(result).data)
