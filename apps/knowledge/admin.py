"""Knowledge admin: the articles, FAQs and sources of a client's knowledge base, under the one
permission rule (viewers read; agents write articles and FAQs; admins manage sources, which
make the server fetch addresses). Every write goes through the content services, so an edit is
validated with the same messages as the API and indexed again when its text changed.

An article's page shows its Markdown rendered (HTML in the text is escaped, never run)."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _
from markdown_it import MarkdownIt

from apps.accounts.models import User
from apps.api import admin as api_admin
from apps.api.admin import TenantScopedAdmin
from apps.api.permissions import MANAGE, SUPPORT
from apps.core.exceptions import ApplicationError
from apps.knowledge import sources
from apps.knowledge.models import (
    FAQ,
    Article,
    ArticleKind,
    ArticleStatus,
    KnowledgeSource,
)
from apps.knowledge.selectors import source_progress_json
from apps.knowledge.services.articles import (
    article_delete,
    article_errors,
    article_publish,
    article_save,
    article_set_enabled,
    clean_tags,
    source_delete,
    source_errors,
    source_save,
)
from apps.knowledge.services.sync import source_problem, source_sync_start

PREVIEW_CHARS = 100_000


def render_markdown(text: str) -> SafeString:
    """Markdown as HTML for the preview; HTML in the text is escaped (CommonMark with raw HTML
    off), so a pasted `<script>` shows as text."""
    html = MarkdownIt("commonmark", {"html": False}).render(text[:PREVIEW_CHARS])
    return mark_safe(html)  # noqa: S308 - markdown-it escapes every raw HTML tag (html=False)


class TagsField(forms.Field):
    """Tags as one comma-separated line."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> list[str]:
        try:
            return clean_tags(str(value or ""))
        except ApplicationError as exc:
            raise forms.ValidationError(exc.extra["fields"]["tags"]) from None


def _errors_on_form(form: forms.ModelForm, errors: dict[str, str]) -> None:
    for name, message in errors.items():
        form.add_error(name if name in form.fields else None, message)


class ArticleForm(forms.ModelForm):
    tags = TagsField(
        label=_("tags"),
        required=False,
        help_text=_("Comma-separated labels, e.g. returns, policy."),
    )

    class Meta:
        model = Article
        fields = ["client", "kind", "title", "body", "language", "tags", "enabled", "status"]
        widgets = {"body": forms.Textarea(attrs={"rows": 18, "cols": 100})}

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # ModelForm's, missing from the stubs
        if self.instance.client_id is not None:
            _errors_on_form(self, article_errors(self.instance))


class FaqForm(ArticleForm):
    class Meta(ArticleForm.Meta):
        model = FAQ
        fields = ["client", "title", "body", "language", "tags", "enabled", "status"]
        labels = {"title": _("Question"), "body": _("Answer")}
        help_texts = {"title": "", "body": _("Markdown.")}
        widgets = {"body": forms.Textarea(attrs={"rows": 8, "cols": 100})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.kind = ArticleKind.FAQ


class LanguageFilter(api_admin.LanguageFilter):
    empty_label = _("the client's language")


class SourceFilter(admin.SimpleListFilter):
    """The sources of the articles the user may see (a plain related filter would list every
    client's sources)."""

    title = _("source")
    parameter_name = "source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        rows = (
            model_admin.get_queryset(request)
            .exclude(source__isnull=True)
            .order_by("source__name")
            .values_list("source_id", "source__name")
            .distinct()
        )
        return [("-", gettext("none (written by staff)")), *((str(pk), n) for pk, n in rows)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        if value == "-":
            return queryset.filter(source__isnull=True)
        return queryset.filter(source_id=int(value)) if value.isdigit() else queryset.none()


class _DeletedThroughService(TenantScopedAdmin):
    """Rows the admin deletes one by one through their service (`delete_through_service`), on
    the delete page and with the bulk action alike, so what the service also removes (indexed
    chunks, a source's articles) goes with each row."""

    def delete_through_service(self, obj: Any) -> None:
        raise NotImplementedError

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.delete_through_service(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset.select_related("client"):
            self.delete_through_service(obj)


class _ContentAdmin(_DeletedThroughService):
    """What articles and FAQs share: agents write, saves and deletes go through the services,
    actions switch on, off and publish."""

    change_need = SUPPORT
    list_select_related = ["client", "source"]
    search_fields = ["title", "body"]
    ordering = ["title", "pk"]
    actions = ["enable", "disable", "publish", "delete_selected"]
    readonly_fields = [
        "preview",
        "source",
        "source_url",
        "approved_by",
        "approved_at",
        "created_at",
        "updated_at",
    ]
    kind: ClassVar[str | None] = None

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fixed = list(self.readonly_fields)
        return fixed if obj is None else ["client", *fixed]

    def save_model(self, request: HttpRequest, obj: Article, form: Any, change: bool) -> None:
        if not self.role_permits_on(request, obj, self.change_need):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        if self.kind:
            obj.kind = self.kind
        user = cast(User, request.user)
        publishing = "status" in form.changed_data and obj.status == ArticleStatus.PUBLISHED
        if publishing and change:
            obj.status = ArticleStatus.DRAFT  # article_publish records who approved it
            article_save(article=obj, user=user)
            article_publish(article=obj, user=user)
        else:
            article_save(article=obj, user=user)

    def delete_through_service(self, obj: Article) -> None:
        article_delete(article=obj)

    # ---------------------------------------------------------------------------- columns

    @admin.display(description=_("Tags"))
    def tags_label(self, obj: Article) -> str:
        return ", ".join(obj.tags or [])

    @admin.display(description=_("Language"), ordering="language")
    def language_label(self, obj: Article) -> str:
        return obj.language or gettext("the client's")

    @admin.display(description=_("Preview"))
    def preview(self, obj: Article) -> SafeString | str:
        if not obj.pk or not obj.body:
            return gettext("Save to see the text rendered.")
        return format_html(
            '<div class="knowledge-preview" style="max-width:50rem;padding:.5rem 1rem;'
            'border:1px solid var(--hairline-color, #ddd);border-radius:4px">{}</div>',
            render_markdown(obj.body),
        )

    # ---------------------------------------------------------------------------- actions

    def _done(self, request: HttpRequest, count: int, message: str) -> None:
        self.message_user(request, message % {"count": count}, messages.SUCCESS)

    @admin.action(description=_("Switch on — the assistant may use them"))
    def enable(self, request: HttpRequest, queryset: QuerySet[Article]) -> None:
        count = 0
        for article in queryset.select_related("client"):
            article_set_enabled(article=article, enabled=True)
            count += 1
        self._done(request, count, gettext("Switched on %(count)d article(s)."))

    @admin.action(description=_("Switch off — the assistant never sees them"))
    def disable(self, request: HttpRequest, queryset: QuerySet[Article]) -> None:
        count = 0
        for article in queryset.select_related("client"):
            article_set_enabled(article=article, enabled=False)
            count += 1
        self._done(request, count, gettext("Switched off %(count)d article(s)."))

    @admin.action(description=_("Publish — approve the drafts for the assistant"))
    def publish(self, request: HttpRequest, queryset: QuerySet[Article]) -> None:
        user = cast(User, request.user)
        published = skipped = 0
        for article in queryset.select_related("client"):
            if article.status == ArticleStatus.PUBLISHED:
                skipped += 1
                continue
            article_publish(article=article, user=user)
            published += 1
        if published:
            self._done(request, published, gettext("Published %(count)d draft(s)."))
        if skipped:
            self.message_user(
                request,
                ngettext(
                    "%(count)d article was already published.",
                    "%(count)d articles were already published.",
                    skipped,
                )
                % {"count": skipped},
                messages.INFO,
            )


@admin.register(Article)
class ArticleAdmin(_ContentAdmin):
    form = ArticleForm
    list_display = [
        "title",
        "kind",
        "language_label",
        "tags_label",
        "enabled",
        "status",
        "source",
        "updated_at",
    ]
    list_filter = [
        "kind",
        "status",
        "enabled",
        LanguageFilter,
        SourceFilter,
        ("client", admin.RelatedOnlyFieldListFilter),
        "updated_at",
    ]
    search_help_text = _("Search the articles' titles and text.")
    fieldsets = [
        (None, {"fields": ["client", "kind", "title", "body", "preview"]}),
        (_("For the assistant"), {"fields": ["language", "tags", "enabled", "status"]}),
        (
            _("Where it comes from"),
            {"fields": ["source", "source_url", "approved_by", "approved_at"]},
        ),
        (_("History"), {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]


@admin.register(FAQ)
class FaqAdmin(_ContentAdmin):
    form = FaqForm
    kind = ArticleKind.FAQ
    list_display = ["question", "short_answer", "language_label", "enabled", "status", "updated_at"]
    list_filter = [
        "status",
        "enabled",
        LanguageFilter,
        ("client", admin.RelatedOnlyFieldListFilter),
    ]
    search_help_text = _("Search the questions and answers.")
    fieldsets = [
        (None, {"fields": ["client", "title", "body", "preview"]}),
        (_("For the assistant"), {"fields": ["language", "tags", "enabled", "status"]}),
        (_("History"), {"fields": ["approved_by", "approved_at", "created_at", "updated_at"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(kind=ArticleKind.FAQ)

    @admin.display(description=_("Question"), ordering="title")
    def question(self, obj: Article) -> str:
        return obj.title

    @admin.display(description=_("Answer"))
    def short_answer(self, obj: Article) -> str:
        return obj.body if len(obj.body) <= 90 else obj.body[:89] + "…"


# ------------------------------------------------------------------------------------- sources


# --- importing: "Sync now" and the sync's progress on sources -------------------------------


class SourceSyncAdminMixin:
    """The source admin's import part: the "Sync now" action and the progress columns and
    fields (done of total, the message, the page errors). Refresh the page to follow a sync."""

    sync_list_display = ("status", "sync_progress", "last_synced_at")
    sync_readonly_fields = ("status", "last_synced_at", "error", "sync_progress", "sync_errors")

    @admin.display(description=_("progress"))
    def sync_progress(self, obj: KnowledgeSource) -> str:
        progress = obj.progress or {}
        if not progress:
            return "—"
        counts = gettext("%(done)s / %(total)s pages") % {
            "done": progress.get("done", 0),
            "total": progress.get("total", 0),
        }
        message = progress.get("message") or ""
        return f"{counts} — {message}" if message else counts

    @admin.display(description=_("page errors"))
    def sync_errors(self, obj: KnowledgeSource) -> SafeString | str:
        errors = [e for e in (obj.progress or {}).get("errors") or [] if isinstance(e, dict)]
        if not errors:
            return "—"
        items = format_html_join(
            "", "<li>{}: {}</li>", ((e.get("page", ""), e.get("error", "")) for e in errors)
        )
        return format_html("<ul>{}</ul>", items)

    @admin.action(description=_("Sync now"), permissions=["change"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[KnowledgeSource]) -> None:
        queued = 0
        for source in queryset.select_related("client"):
            try:
                source_sync_start(source=source, user=request.user)
            except ApplicationError as exc:
                self.message_user(  # type: ignore[attr-defined]
                    request, f"{source.name}: {exc}", messages.ERROR
                )
            else:
                queued += 1
        if queued:
            self.message_user(  # type: ignore[attr-defined]
                request,
                ngettext(
                    "%(count)d source is syncing; refresh the page to see its progress.",
                    "%(count)d sources are syncing; refresh the page to see their progress.",
                    queued,
                )
                % {"count": queued},
                messages.SUCCESS,
            )


class SourceForm(forms.ModelForm):
    class Meta:
        model = KnowledgeSource
        fields = ["client", "name", "kind", "url", "file", "language", "enabled", "resync_hours"]

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # ModelForm's, missing from the stubs
        if self.instance.client_id is not None:
            _errors_on_form(self, source_errors(self.instance))


@admin.register(KnowledgeSource)
class KnowledgeSourceAdmin(SourceSyncAdminMixin, _DeletedThroughService):
    change_need = MANAGE
    form = SourceForm
    list_display = [
        "name",
        "kind",
        "status",
        "sync_progress",
        "last_synced_at",
        "short_error",
        "article_count",
        "enabled",
        "client",
    ]
    list_filter = ["kind", "status", "enabled", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client"]
    search_fields = ["name", "url"]
    ordering = ["name", "pk"]
    readonly_fields = [
        "status",
        "last_synced_at",
        "error",
        "sync_progress",
        "sync_errors",
        "created_at",
        "updated_at",
    ]
    actions = ["sync_now", "delete_selected"]
    fieldsets = [
        (None, {"fields": ["client", "name", "kind", "url", "file", "language"]}),
        (_("For the assistant"), {"fields": ["enabled", "resync_hours"]}),
        (
            _("Sync"),
            {"fields": ["status", "sync_progress", "last_synced_at", "error", "sync_errors"]},
        ),
        (_("History"), {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fixed = list(self.readonly_fields)
        return fixed if obj is None else ["client", *fixed]

    change_form_template = "admin/knowledge/knowledgesource/change_form.html"

    def save_model(
        self, request: HttpRequest, obj: KnowledgeSource, form: Any, change: bool
    ) -> None:
        if not self.role_permits_on(request, obj, self.change_need):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        source_save(source=obj)
        # A new source, one whose kind or what its kind reads (an address, a file) changed, or
        # "Sync now" on its page: its sync starts now (a kind with nothing to import does not).
        changed = {"kind", *sources.kind_of(obj.kind).fields} & set(
            form.changed_data if change else ()
        )
        if (not change or changed or "_syncnow" in request.POST) and not source_problem(obj):
            try:
                source_sync_start(source=obj, user=request.user)
            except ApplicationError as exc:
                self.message_user(request, f"{obj.name}: {exc}", messages.ERROR)
            else:
                self.message_user(
                    request,
                    gettext("%(name)s is syncing; its page shows the progress.")
                    % {"name": obj.name},
                    messages.SUCCESS,
                )

    def response_change(self, request: HttpRequest, obj: KnowledgeSource) -> HttpResponse:
        if "_syncnow" in request.POST:  # back to the page, which shows the sync's progress
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<int:source_id>/progress/",
                self.admin_site.admin_view(self.progress_view),
                name="knowledge_knowledgesource_progress",
            )
        ]
        return own + super().get_urls()

    def progress_view(self, request: HttpRequest, source_id: int) -> JsonResponse:
        """The sync's state for the change page's progress bar (polled while it syncs)."""
        source = self.get_queryset(request).filter(pk=source_id).first()
        # Another tenant's source (or a role too low to view it) looks like a missing one.
        if source is None or not self.has_view_permission(request, source):
            raise Http404
        return JsonResponse(source_progress_json(source))

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        source = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if source is not None:
            context["sync"] = source_progress_json(source)
            context["can_sync"] = not source_problem(source) and self.has_change_permission(
                request, source
            )
        return super().change_view(request, object_id, form_url, context)

    def delete_through_service(self, obj: KnowledgeSource) -> None:
        source_delete(source=obj)

    @admin.display(description=_("Error"))
    def short_error(self, obj: KnowledgeSource) -> str:
        return obj.error if len(obj.error) <= 80 else obj.error[:79] + "…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(article_total=Count("articles"))

    @admin.display(description=_("Articles"), ordering="article_total")
    def article_count(self, obj: KnowledgeSource) -> int:
        return int(getattr(obj, "article_total", 0))
