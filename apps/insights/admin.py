"""Insights in the admin: the proposals staff review (with their evidence) and the runs.

Proposals are tenant-scoped like every admin (`TenantScopedAdmin`): a client's staff see their
own client's proposals (viewer role and up) and approve, reject or edit a pending one with the
admin role (approving an FAQ or an article changes what the assistant knows, a MANAGE-level
setting). Approve / reject — and, for a missing article, "draft article" — are list actions and
buttons on the proposal's page; all call the services.

The proposals list also carries, per client the user may see, a status block for "Run insights
now" (queued / running with its steps / finished with its counts / failed with the reason; the
page refreshes itself while a run is in flight), its button for the admin role, and in a
client's first week a summary of what exists so far."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from apps.api.admin import ReadOnlyAuditAdmin, TenantScopedAdmin
from apps.api.permissions import MANAGE, READ
from apps.api.resolver import resolver
from apps.clients.models import Client
from apps.conversations.admin import conversation_link
from apps.core.exceptions import ApplicationError
from apps.insights.models import (
    InsightProposal,
    InsightRun,
    ProposalKind,
    ProposalStatus,
    RunStatus,
)
from apps.insights.selectors import conversations_by_public_id, first_week_summary, latest_run_now
from apps.insights.services import (
    RUN_STEPS,
    insights_run_now,
    proposal_approve,
    proposal_draft_article,
    proposal_reject,
)

EVIDENCE_SHOWN = 10
EDITABLE = {
    ProposalKind.FAQ: ("question", "answer"),
    ProposalKind.NOTE: ("content",),
    ProposalKind.ARTICLE: ("outline",),
}
KIND_FIELDS = {
    ProposalKind.FAQ: ("question", "answer"),
    ProposalKind.NOTE: ("note_type", "content", "note_state"),
    ProposalKind.ARTICLE: ("asked", "outline", "draft"),
}
PROPOSAL_FIELDS: tuple[str, ...] = (
    "title",
    "kind",
    "status",
    "origin",
    "client",
    "count",
    "evidence",
    "question",
    "answer",
    "asked",
    "outline",
    "draft",
    "note_type",
    "content",
    "note_state",
    "run_summary",
    "created_at",
    "updated_at",
    "reviewed_by",
    "reviewed_at",
    "review_comment",
)


@admin.register(InsightProposal)
class InsightProposalAdmin(TenantScopedAdmin):
    change_form_template = "admin/insights/insightproposal/change_form.html"
    change_list_template = "admin/insights/insightproposal/change_list.html"
    list_display = ["title", "kind", "status", "count", "client", "created_at", "reviewed_by"]
    list_filter = [
        "status",
        "kind",
        "origin",
        ("client", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    list_select_related = ["client", "reviewed_by", "note", "article"]
    search_fields = ["title", "question", "answer", "content"]
    ordering = ["-created_at"]
    actions = ["approve_selected", "reject_selected", "draft_article_selected"]
    fields = PROPOSAL_FIELDS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # proposals come from the insights job and from staff (flag and teach)

    # -- run insights now, and the first week ----------------------------------------------
    SHOWN_CLIENTS = 20

    def get_urls(self) -> list[URLPattern]:
        run_now = path(
            "run-now/",
            self.admin_site.admin_view(self.run_now_view),
            name="insights_insightproposal_run_now",
        )
        return [run_now, *super().get_urls()]

    def _clients(self, request: HttpRequest, need: str) -> QuerySet[Client]:
        allowed = resolver.admin_client_ids(request, need)
        clients = Client.objects.filter(is_active=True).order_by("name")
        return clients if allowed is None else clients.filter(pk__in=allowed)

    def run_now_view(self, request: HttpRequest) -> HttpResponse:
        """POST only: queue "Run insights now" for one client the user manages (any other
        client, another tenant's included, answers 404)."""
        if request.method != "POST":
            raise PermissionDenied
        raw = str(request.POST.get("client", "")).strip()
        client = (
            self._clients(request, MANAGE).filter(pk=int(raw)).first() if raw.isdigit() else None
        )
        if client is None:
            raise Http404
        try:
            insights_run_now(client=client, actor=request.user)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.WARNING)
        else:
            self.message_user(
                request,
                _(
                    "Insights for %(client)s are queued: this page shows their progress and "
                    "the new proposals when they are done."
                )
                % {"client": client.name},
                messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:insights_insightproposal_changelist"))

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        managed = set(self._clients(request, MANAGE).values_list("pk", flat=True))
        blocks: list[dict[str, Any]] = []
        for client in self._clients(request, READ)[: self.SHOWN_CLIENTS]:
            run = latest_run_now(client=client)
            blocks.append(
                {
                    "client": client,
                    "can_run": client.pk in managed,
                    "run": run,
                    "run_text": run_status_text(run) if run is not None else "",
                    "first_week": first_week_summary(client=client),
                }
            )
        context = {
            **(extra_context or {}),
            "insight_blocks": blocks,
            "insights_in_flight": any(
                b["run"] is not None and b["run"].status in (RunStatus.QUEUED, RunStatus.RUNNING)
                for b in blocks
            ),
        }
        return super().changelist_view(request, extra_context=context)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the review trail stays; reject what is not wanted

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        editable = (
            EDITABLE.get(obj.kind, ())
            if obj is not None and obj.status == ProposalStatus.PENDING_REVIEW
            else ()
        )
        return [name for name in PROPOSAL_FIELDS if name not in editable]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        kind = obj.kind if obj is not None else ProposalKind.FAQ
        others = {f for k, names in KIND_FIELDS.items() if k != kind for f in names}
        return [f for f in PROPOSAL_FIELDS if f not in others or f in KIND_FIELDS.get(kind, ())]

    @admin.display(description=gettext_lazy("Customers asked"))
    def asked(self, obj: InsightProposal) -> SafeString | str:
        questions = [str(q) for q in obj.questions or []]
        if not questions:
            return "-"
        return format_html(
            "<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((q,) for q in questions))
        )

    @admin.display(description=gettext_lazy("Draft article"))
    def draft(self, obj: InsightProposal) -> SafeString | str:
        article = obj.article
        if article is None or article.client_id != obj.client_id:
            return _("- (use “Draft article” to create it)")
        try:
            url = reverse("admin:knowledge_article_change", args=[article.pk])
        except NoReverseMatch:  # the knowledge admin is not registered
            return f"{article.title} ({article.get_status_display()})"
        return format_html(
            '<a href="{}">{}</a> ({})', url, article.title, article.get_status_display()
        )

    @admin.display(description=gettext_lazy("Example conversations"))
    def evidence(self, obj: InsightProposal) -> SafeString | str:
        shown = [str(i) for i in obj.conversation_ids[:EVIDENCE_SHOWN]]
        # Looked up within the proposal's own client: another tenant's id would link nowhere.
        found = conversations_by_public_id(client=obj.client, public_ids=shown)
        links = [conversation_link(found[i]) for i in shown if i in found]
        if not links:
            return "-"
        more = len(obj.conversation_ids) - len(shown)
        return format_html(
            "{}{}",
            format_html_join(" ", "{}", ((link,) for link in links)),
            format_html(_(" … and {} more"), more) if more > 0 else "",
        )

    @admin.display(description=gettext_lazy("Note"))
    def note_state(self, obj: InsightProposal) -> str:
        note = obj.note
        if note is None or note.client_id != obj.client_id:
            return "-"
        return _("Note #%(id)s: %(status)s (source %(source)s)") % {
            "id": note.pk,
            "status": note.get_status_display(),
            "source": note.source,
        }

    @admin.display(description=gettext_lazy("Run"))
    def run_summary(self, obj: InsightProposal) -> str:
        run = obj.run
        if run is None:
            return "-"
        return _(
            "%(start)s – %(end)s: read %(items)s item(s), %(calls)s model call(s) (%(model)s)"
        ) % {
            "start": f"{run.window_start:%Y-%m-%d}",
            "end": f"{run.window_end:%Y-%m-%d}",
            "items": sum(run.found.values()),
            "calls": run.llm_calls,
            "model": run.model,
        }

    # -- approve / reject --------------------------------------------------------------------
    def _draft(self, request: HttpRequest, proposals: list[InsightProposal]) -> int:
        done = 0
        for proposal in proposals:
            try:
                proposal_draft_article(
                    client=proposal.client, proposal=proposal, actor=request.user
                )
            except ApplicationError as exc:
                self.message_user(request, f"{proposal.title}: {exc.message}", messages.ERROR)
            else:
                done += 1
        return done

    @admin.action(
        description=gettext_lazy("Draft the article of the selected missing-article proposals")
    )
    def draft_article_selected(
        self, request: HttpRequest, queryset: QuerySet[InsightProposal]
    ) -> None:
        done = self._draft(request, list(queryset.select_related("client")))
        if done:
            self.message_user(
                request,
                _(
                    "%(n)d draft article(s) ready in the knowledge base: write them there, then "
                    "approve the proposal to publish."
                )
                % {"n": done},
                messages.SUCCESS,
            )

    def _review(self, request: HttpRequest, proposals: list[InsightProposal], approve: bool) -> int:
        done = 0
        for proposal in proposals:
            try:
                if approve:
                    proposal_approve(client=proposal.client, proposal=proposal, actor=request.user)
                else:
                    proposal_reject(client=proposal.client, proposal=proposal, actor=request.user)
            except ApplicationError as exc:
                self.message_user(request, f"{proposal.title}: {exc.message}", messages.ERROR)
            else:
                done += 1
        return done

    @admin.action(description=gettext_lazy("Approve the selected proposals"))
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[InsightProposal]) -> None:
        done = self._review(request, list(queryset.select_related("client")), approve=True)
        if done:
            self.message_user(
                request,
                _("Approved %(n)d proposal(s): FAQs and articles are published, notes are active.")
                % {"n": done},
                messages.SUCCESS,
            )

    @admin.action(description=gettext_lazy("Reject the selected proposals"))
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[InsightProposal]) -> None:
        done = self._review(request, list(queryset.select_related("client")), approve=False)
        if done:
            self.message_user(
                request, _("Rejected %(n)d proposal(s).") % {"n": done}, messages.SUCCESS
            )

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        obj = context.get("original")
        context["can_review"] = (
            obj is not None
            and obj.status == ProposalStatus.PENDING_REVIEW
            and self.has_change_permission(request, obj)
        )
        context["can_draft"] = bool(
            obj is not None
            and context["can_review"]
            and obj.kind == ProposalKind.ARTICLE
            and obj.article_id is None
        )
        return super().render_change_form(request, context, *args, **kwargs)

    def response_change(self, request: HttpRequest, obj: InsightProposal) -> HttpResponse:
        """ "Save and approve" / "Reject" on the proposal's page: the edits are saved first,
        then the service decides (an invalid FAQ stays pending, with the error shown)."""
        if "_draft" in request.POST:
            if self._draft(request, [obj]):
                self.message_user(
                    request,
                    _("Drafted “%(title)s”: write it in the knowledge base, then approve.")
                    % {"title": obj.title},
                    messages.SUCCESS,
                )
            return HttpResponseRedirect(request.path)
        approve, reject = "_approve" in request.POST, "_reject" in request.POST
        if not (approve or reject):
            return super().response_change(request, obj)
        if self._review(request, [obj], approve=approve):
            done = _("Approved “%(title)s”.") if approve else _("Rejected “%(title)s”.")
            self.message_user(request, done % {"title": obj.title}, messages.SUCCESS)
        return HttpResponseRedirect(request.path)


def run_status_text(run: InsightRun) -> str:
    """One sentence a support lead reads: where a "Run insights now" run is."""
    if run.status == RunStatus.QUEUED:
        return _("Queued: the run starts as soon as a background worker is free.")
    if run.status == RunStatus.RUNNING:
        return _("Running: %(done)d of %(total)d steps done.") % {
            "done": run.steps_done,
            "total": RUN_STEPS,
        }
    if run.status == RunStatus.FAILED:
        return _(
            "Failed: the run stopped before it finished; you can run it again. Details: %(reason)s"
        ) % {"reason": run.error or "-"}
    return _(
        "Finished: read %(items)d item(s) from %(start)s to %(end)s, "
        "%(created)d new proposal(s), %(updated)d updated."
    ) % {
        "items": sum(run.found.values()),
        "start": f"{run.window_start:%Y-%m-%d %H:%M}",
        "end": f"{run.window_end:%Y-%m-%d %H:%M}",
        "created": run.proposals_created,
        "updated": run.proposals_updated,
    }


RUN_FIELDS: tuple[str, ...] = (
    "client",
    "window_start",
    "window_end",
    "status",
    "started_at",
    "finished_at",
    "found",
    "items_sent",
    "items_left_out",
    "topics",
    "proposals_created",
    "proposals_updated",
    "ids_dropped",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "model",
    "error",
    "on_demand",
    "requested_by",
    "steps_done",
)


@admin.register(InsightRun)
class InsightRunAdmin(ReadOnlyAuditAdmin):
    list_display = [
        "window_start",
        "window_end",
        "client",
        "status",
        "items_sent",
        "items_left_out",
        "proposals_created",
        "proposals_updated",
        "ids_dropped",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
    ]
    list_filter = ["status", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client"]
    ordering = ["-window_end", "-created_at"]
    readonly_fields = RUN_FIELDS
    fields = RUN_FIELDS
