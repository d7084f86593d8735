"""Notes admin: the learning gate. Staff read what the assistant learnt, approve or reject what
it proposes, archive what is outdated and write notes of their own — per client, under the one
permission rule (viewers read; agents and up write, approve and archive).

The changelist starts with the seed's health numbers per client (total, sessions, latest note,
the count of each type). Every write goes through the note services, which keep the notes cache
of the prompts in step.
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import User
from apps.api import admin as api_admin
from apps.api.admin import TenantScopedAdmin
from apps.api.permissions import SUPPORT, clients_permitting
from apps.clients.models import Client
from apps.conversations.admin import conversation_column
from apps.core.exceptions import ApplicationError
from apps.notes.debug import TYPE_ICONS, note_label
from apps.notes.maintenance import (
    EDITABLE_FIELDS,
    note_delete,
    notes_delete_for_clients,
    notes_health,
)
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add, note_set_status, note_update
from apps.notes.sessions import current_session_id

RECENT_SESSIONS = 10

# Which notes each review action applies to (the rest of a selection is left alone).
REVIEW_APPLIES = {
    "approve": lambda note: note.status != NoteStatus.ACTIVE,
    "archive": lambda note: note.status != NoteStatus.ARCHIVED,
    "reject": lambda note: not note.rejected,
}


class SessionFilter(admin.SimpleListFilter):
    """Which start of the service wrote the note (the session id): this process's own and the
    most recent ones (a full list would grow with every deploy)."""

    title = _("written during")
    parameter_name = "session"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        current = current_session_id()
        recent = (
            model_admin.get_queryset(request)
            .exclude(session_id="")
            .order_by("-created_at")
            .values_list("session_id", flat=True)
        )
        seen: list[str] = []
        for session in recent[:500]:
            if session not in seen:
                seen.append(session)
            if len(seen) >= RECENT_SESSIONS:
                break
        options = [(current, gettext("%(run)s (the current start)") % {"run": current})]
        return options + [(s, s) for s in seen if s != current]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(session_id=value) if value else queryset


class LanguageFilter(api_admin.LanguageFilter):
    empty_label = _("every language")


READONLY = (
    "source",
    "hits",
    "session_id",
    "conversation_link",
    "trace",
    "content_hash",
    "reviewed_by",
    "reviewed_at",
    "created_at",
    "updated_at",
)


@admin.register(Note)
class NoteAdmin(TenantScopedAdmin):
    change_need = SUPPORT
    change_list_template = "admin/notes/note/change_list.html"
    list_display = [
        "type_label",
        "short_content",
        "client",
        "language_label",
        "status",
        "source",
        "ref",
        "confidence",
        "hits",
        "session_id",
        "created_at",
    ]
    list_display_links = ["type_label", "short_content"]
    list_filter = [
        "type",
        "status",
        "source",
        LanguageFilter,
        SessionFilter,
        ("client", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    list_select_related = ["client"]
    search_fields = ["content", "ref"]
    search_help_text = _("Search the notes' text and what they are about (a tool or a topic).")
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-pk"]
    actions = ["approve", "archive", "reject", "delete_selected"]
    raw_id_fields = ["conversation", "trace"]

    # ----------------------------------------------------------------------------- the form

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        editable = ["client", *EDITABLE_FIELDS, "status"]
        return editable if obj is None else [*editable, *READONLY]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        if obj is None:
            return []
        # the client of a note never changes; a viewer sees everything read-only
        fixed = ["client", *READONLY]
        if not self.has_change_permission(request, obj):
            return [*fixed, *EDITABLE_FIELDS, "status"]
        return fixed

    def save_model(self, request: HttpRequest, obj: Note, form: Any, change: bool) -> None:
        if not self.role_permits_on(request, obj, self.change_need):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        user = cast(User, request.user)
        data = form.cleaned_data
        if not change:
            # A staff note; the service dedups and keeps the prompt cache in step.
            note = note_add(
                client=data["client"],
                type=data["type"],
                content=data["content"],
                language=data.get("language") or "",
                ref=data.get("ref") or "",
                confidence=data.get("confidence"),
                source=NoteSource.STAFF,
                status=data.get("status") or NoteStatus.ACTIVE,
            )
            obj.pk = note.pk
            return
        original = Note.objects.filter(client_id=obj.client_id).get(pk=obj.pk)
        changes = {name: data[name] for name in EDITABLE_FIELDS if name in form.changed_data}
        note = original
        if changes:
            note = note_update(note=original, **changes)
        if "status" in form.changed_data and data["status"] != original.status:
            note_set_status(note=note, status=data["status"], by=user)

    def delete_model(self, request: HttpRequest, obj: Note) -> None:
        note_delete(client=obj.client, note=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        notes_delete_for_clients(notes=queryset)

    # ---------------------------------------------------------------------------- columns

    @admin.display(description=_("Type"), ordering="type")
    def type_label(self, obj: Note) -> str:
        return note_label(obj)

    @admin.display(description=_("Note"))
    def short_content(self, obj: Note) -> str:
        return obj.content if len(obj.content) <= 90 else obj.content[:89] + "…"

    @admin.display(description=_("Language"), ordering="language")
    def language_label(self, obj: Note) -> str:
        return obj.language or gettext("every language")

    conversation_link = conversation_column()

    # ---------------------------------------------------------------------------- actions

    def _review(
        self, request: HttpRequest, queryset: QuerySet[Note], *, action: str, done: str
    ) -> None:
        """Apply a review action (approve / archive / reject) through the note service to each
        selected note it applies to; the others are counted and left alone."""
        user = cast(User, request.user)
        changed = skipped = 0
        for note in queryset.select_related("client"):
            if not REVIEW_APPLIES[action](note):
                skipped += 1
                continue
            try:
                note_set_status(note=note, status=action, by=user)
            except ApplicationError as exc:
                self.message_user(
                    request,
                    gettext("Note %(id)s: %(why)s") % {"id": note.pk, "why": exc.message},
                    messages.ERROR,
                )
            else:
                changed += 1
        if changed:
            self.message_user(request, done % {"count": changed}, messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                ngettext(
                    "%(count)d note left as it was (already in that state).",
                    "%(count)d notes left as they were (already in that state).",
                    skipped,
                )
                % {"count": skipped},
                messages.INFO,
            )

    @admin.action(
        description=_("Approve — the assistant may use them in later conversations"),
        permissions=["change"],
    )
    def approve(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        self._review(
            request, queryset, action="approve", done=gettext("Approved %(count)d note(s).")
        )

    @admin.action(
        description=_("Archive — keep them, but the assistant no longer sees them"),
        permissions=["change"],
    )
    def archive(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        self._review(
            request, queryset, action="archive", done=gettext("Archived %(count)d note(s).")
        )

    @admin.action(description=_("Reject — never propose them again"), permissions=["change"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        # A rejected note is archived and marked rejected (not deleted): it stays out of prompts,
        # the same proposal is not put up for review again, and the record of what was proposed
        # and who turned it down is kept.
        self._review(
            request, queryset, action="reject", done=gettext("Rejected %(count)d note(s).")
        )

    # ------------------------------------------------------------------- health numbers

    def health_clients(self, request: HttpRequest) -> QuerySet[Client]:
        """The clients whose numbers the changelist shows: the user's (platform operators: every
        client with notes), narrowed to one when the list is filtered by client."""
        clients = Client.objects.order_by("name")
        if request.user.is_superuser:
            with_notes = Note.objects.unscoped("a platform operator's filter lists every client")
            clients = clients.filter(pk__in=with_notes.values("client_id"))
        else:
            clients = clients.filter(pk__in=clients_permitting(request.user, self.view_need))
        chosen = request.GET.get("client__id__exact")
        if chosen and chosen.isdigit():
            clients = clients.filter(pk=int(chosen))
        return clients

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if self.has_view_permission(request):
            context["notes_health"] = notes_health(clients=self.health_clients(request)[:50])
            context["note_types"] = [
                (value, TYPE_ICONS[value], label) for value, label in NoteType.choices
            ]
        return super().changelist_view(request, extra_context=context)
