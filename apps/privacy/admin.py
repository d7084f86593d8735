"""Privacy in the admin: the record of exports and erasures (read-only, for the client's
admins), and the page where a support lead finds a customer by e-mail, conversation id or visitor
id, sees what an erasure would take, downloads the export and erases with a confirmation."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import User
from apps.api.admin import ReadOnlyAuditAdmin, pretty_json_block
from apps.api.permissions import MANAGE
from apps.api.resolver import resolver
from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.privacy.downloads import export_download
from apps.privacy.models import DataSubjectRequest, MatchKind, RequestChannel
from apps.privacy.selectors import SubjectMatch, subject_conversations
from apps.privacy.services import (
    NOT_ERASED,
    subject_erase,
    subject_export,
    unconfirmed_matches,
)

SHOWN_CONVERSATIONS = 50
RECORD_FIELDS: tuple[str, ...] = (
    "public_id",
    "client",
    "kind",
    "match_kind",
    "match_digest",
    "channel",
    "requester",
    "conversations",
    "rows",
    "unconfirmed_left_out",
    "not_erased_list",
    "created_at",
    "keep_until",
)


def extra_identifiers(text: str) -> list[str]:
    """The erase form's "also erase" box: one identifier a line."""
    return [line.strip() for line in text.splitlines() if len(line.strip()) >= 3][:50]


def not_erased_shown(items: list[dict[str, Any]]) -> list[str]:
    """What an erasure could not reach, in the staff member's language."""
    shown = []
    for item in items or []:
        texts = NOT_ERASED.get(str(item.get("code")))
        where, what, why = texts if texts else (item["where"], item["what"], item["why"])
        shown.append(
            gettext("%(where)s — %(what)s (%(rows)d): %(why)s")
            % {"where": where, "what": what, "rows": int(item.get("rows", 0)), "why": why}
        )
    return shown


class FindCustomerForm(forms.Form):
    client = forms.ModelChoiceField(queryset=Client.objects.none(), label=_("Business"))
    match_kind = forms.ChoiceField(
        label=_("Find by"),
        choices=[
            (MatchKind.EMAIL, _("Customer's e-mail address")),
            (MatchKind.CONVERSATION, _("Conversation id")),
            (MatchKind.VISITOR, _("Visitor id")),
            (MatchKind.CUSTOMER, _("Verified customer id")),
        ],
    )
    value = forms.CharField(label=_("Value"), max_length=254)

    def __init__(self, *args: Any, clients: QuerySet[Client], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["client"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = clients
        if clients.count() == 1:
            field.initial = clients.first()


@admin.register(DataSubjectRequest)
class DataSubjectRequestAdmin(ReadOnlyAuditAdmin):
    view_need = MANAGE
    change_list_template = "admin/privacy/datasubjectrequest/change_list.html"
    list_display = [
        "created_at",
        "client",
        "kind",
        "match_kind",
        "channel",
        "requester",
        "conversations",
        "keep_until",
    ]
    list_filter = ["kind", "channel"]
    list_select_related = ["client", "requested_by"]
    fields = RECORD_FIELDS
    readonly_fields = RECORD_FIELDS

    @admin.display(description=_("requested by"))
    def requester(self, obj: DataSubjectRequest) -> str:
        if obj.requested_by is not None:
            return str(obj.requested_by.email)
        return obj.requested_by_label

    @admin.display(description=_("rows"))
    def rows(self, obj: DataSubjectRequest) -> Any:
        return pretty_json_block(obj.counts)

    @admin.display(description=_("not erased"))
    def not_erased_list(self, obj: DataSubjectRequest) -> Any:
        items = not_erased_shown(obj.not_erased)
        if not items:
            return "—"
        return format_html_join(
            "\n",
            "<p>{}</p>",
            ((item,) for item in items),
        )

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "find/",
                self.admin_site.admin_view(self.find_view),
                name="privacy_datasubjectrequest_find",
            )
        ]
        return own + super().get_urls()

    def _clients(self, request: HttpRequest) -> QuerySet[Client]:
        allowed = resolver.admin_client_ids(request, MANAGE)
        clients = Client.objects.order_by("name")
        return clients if allowed is None else clients.filter(pk__in=allowed)

    def find_view(self, request: HttpRequest) -> HttpResponse:
        # POST only past the empty form: the customer's address stays out of URLs and logs.
        clients = self._clients(request)
        if not clients.exists():
            raise Http404
        form = FindCustomerForm(request.POST if request.method == "POST" else None, clients=clients)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": gettext("Find a customer: export or erase their data"),
            "form": form,
        }
        if not form.is_bound:
            return TemplateResponse(request, "admin/privacy/find.html", context)
        if not form.is_valid():
            if "client" in form.errors and request.POST.get("client"):
                raise Http404  # another tenant's client looks like a missing one
            return TemplateResponse(request, "admin/privacy/find.html", context)
        client: Client = form.cleaned_data["client"]
        match = SubjectMatch(form.cleaned_data["match_kind"], form.cleaned_data["value"])
        action = request.POST.get("action", "find")
        # Conversations whose address was never confirmed that staff ticked to include.
        include = [str(i) for i in request.POST.getlist("include_unconfirmed")][:500]
        if action != "find":
            acted = self._act(request, client, match, action, include)
            if acted is not None:
                return acted
        found = subject_conversations(
            client=client, match=match, include_unconfirmed=include
        ).annotate(visible_messages=Count("messages", filter=Q(messages__visibility="visible")))
        conversations = list(found.select_related("erasure")[:SHOWN_CONVERSATIONS])
        context["conversations"] = conversations
        context["total"] = found.count()
        context["unconfirmed"] = unconfirmed_matches(
            client=client, match=match, include_unconfirmed=include
        )
        context["included"] = (
            sorted(str(c.public_id) for c in found.filter(contact_email_confirmed_at__isnull=True))
            if match.kind == MatchKind.EMAIL
            else []
        )
        context["would_erase"] = None
        context["not_erased"] = []
        if conversations:
            context["would_erase"] = subject_erase(
                client=client,
                match=match,
                channel=RequestChannel.ADMIN,
                dry_run=True,
                include_unconfirmed=include,
            )
            context["not_erased"] = not_erased_shown(context["would_erase"].not_erased)
        return TemplateResponse(request, "admin/privacy/find.html", context)

    def _act(
        self,
        request: HttpRequest,
        client: Client,
        match: SubjectMatch,
        action: str,
        include: list[str],
    ) -> HttpResponse | None:
        user = request.user if isinstance(request.user, User) else None
        try:
            if action in ("export_json", "export_html"):
                result = subject_export(
                    client=client,
                    match=match,
                    channel=RequestChannel.ADMIN,
                    requested_by=user,
                    include_unconfirmed=include,
                )
                fmt = "html" if action == "export_html" else "json"
                return export_download(client=client, result=result, fmt=fmt)
            if action == "erase":
                if request.POST.get("confirm") != "yes":
                    messages.error(
                        request, gettext("Tick the confirmation to erase this customer's data.")
                    )
                    return None
                erased = subject_erase(
                    client=client,
                    match=match,
                    channel=RequestChannel.ADMIN,
                    requested_by=user,
                    include_unconfirmed=include,
                    identifiers=extra_identifiers(request.POST.get("identifiers", "")),
                )
                assert erased.request is not None
                messages.success(
                    request,
                    gettext("Erased the data of %(count)d conversation(s); the record is below.")
                    % {"count": erased.conversations},
                )
                return HttpResponseRedirect(
                    reverse("admin:privacy_datasubjectrequest_change", args=[erased.request.pk])
                )
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return None
        raise Http404
