"""What the assistant knows about a business, as content staff edit: sources (typed in, a URL,
a sitemap, an uploaded file), articles and FAQs (an FAQ is an article whose title is the
question), and the chunks retrieval searches. The business basics (about, contact, hours,
policies, instructions) stay in `Client.business_info`, edited as form fields.

Only a *published* and *enabled* article reaches a prompt (`Article.objects.usable()`)."""

from __future__ import annotations

import hashlib
from typing import Self, cast

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel, TenantQuerySet


def source_kind_choices() -> list[tuple[str, str | Promise]]:
    """The kinds of source (`apps/knowledge/sources/`, one module each): a callable, so a new
    kind module needs no migration."""
    from apps.knowledge import sources

    return sources.choices()


class SourceStatus(models.TextChoices):
    NEW = "new", _("Not synced yet")
    QUEUED = "queued", _("Waiting to sync")
    SYNCING = "syncing", _("Syncing")
    SYNCED = "synced", _("Synced")
    FAILED = "failed", _("Failed")


class KnowledgeSource(PublicTenantModel):
    name = models.CharField(_("name"), max_length=200)
    kind = models.CharField(_("kind"), max_length=10, choices=source_kind_choices)
    url = models.URLField(_("address"), max_length=2000, blank=True)
    file = models.FileField(_("file"), upload_to="knowledge/%Y/%m/", blank=True)
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        default="",
        help_text=_("The language of its articles (en, de, …). Empty: detected per article."),
    )
    enabled = models.BooleanField(
        _("used by the assistant"),
        default=True,
        help_text=_("Off: none of this source's articles reach the assistant."),
    )
    resync_hours = models.PositiveIntegerField(
        _("sync again every (hours)"),
        default=24,
        help_text=_("0 = only when asked. Applies to web addresses and sitemaps."),
    )
    status = status_field(SourceStatus.NEW, max_length=10)
    last_synced_at = models.DateTimeField(_("last synced"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True)
    # {"done": int, "total": int, "bytes": int, "created": int, "updated": int,
    #  "unchanged": int, "failed": int, "message": str} — what the sync task reports as it goes.
    progress = models.JSONField(_("progress"), default=dict, blank=True)

    class Meta:
        verbose_name = _("knowledge source")
        verbose_name_plural = _("knowledge sources")
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["client", "status"], name="knowledge_source_status")]

    def __str__(self) -> str:
        return self.name


class ArticleKind(models.TextChoices):
    ARTICLE = "article", _("Article")
    FAQ = "faq", _("FAQ")


class ArticleStatus(models.TextChoices):
    PUBLISHED = "published", _("Published")
    DRAFT = "draft", _("Draft (waiting for approval)")


class ArticleQuerySet(TenantQuerySet["Article"]):
    def usable(self) -> Self:
        """What may reach a prompt: published, switched on, and from a source switched on."""
        return self.filter(status=ArticleStatus.PUBLISHED, enabled=True).exclude(
            source__enabled=False
        )


class Article(PublicTenantModel):
    kind = models.CharField(
        _("kind"), max_length=10, choices=ArticleKind.choices, default=ArticleKind.ARTICLE
    )
    title = models.CharField(_("title"), max_length=300, help_text=_("For an FAQ: the question."))
    body = models.TextField(_("text"), help_text=_("Markdown. For an FAQ: the answer."))
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        default="",
        help_text=_("en, de, … Empty: the client's default language."),
    )
    tags = models.JSONField(_("tags"), default=list, blank=True)
    enabled = models.BooleanField(
        _("used by the assistant"),
        default=True,
        help_text=_("Off: the assistant never sees this article."),
    )
    status = status_field(ArticleStatus.PUBLISHED, max_length=10, db_index=True)
    source = optional_fk(
        KnowledgeSource, _("source"), on_delete=models.CASCADE, related_name="articles"
    )
    source_url = models.URLField(_("page"), max_length=2000, blank=True)
    # sha256 of title + body: an import that finds the same hash leaves the article and its
    # chunks alone; an edit changes it and the article is indexed again.
    content_hash = models.CharField(
        max_length=64, blank=True, editable=False, verbose_name=_("content hash")
    )
    indexed_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text=_("The content_hash the chunks were built from."),
        verbose_name=_("indexed hash"),
    )
    # For an imported article: the hash of the page's title and text as last imported. A sync
    # that finds the same page again leaves the article alone, staff edits included.
    imported_hash = models.CharField(
        max_length=64, blank=True, editable=False, verbose_name=_("imported hash")
    )
    approved_by = optional_fk(settings.AUTH_USER_MODEL, _("approved by"))
    approved_at = models.DateTimeField(null=True, blank=True, verbose_name=_("approved at"))

    objects = ArticleQuerySet.as_manager()  # type: ignore[misc]

    class Meta:
        verbose_name = _("article")
        verbose_name_plural = _("articles")
        ordering = ["title", "id"]
        indexes = [
            models.Index(fields=["client", "kind", "status"], name="knowledge_article_kind"),
            models.Index(fields=["client", "source_url"], name="knowledge_article_url"),
        ]

    def __str__(self) -> str:
        return self.title

    def refresh_hash(self) -> str:
        """Set and return `content_hash` (sha256 of the stripped title and body): what tells an
        import or an edit whether the article's chunks must be built again."""
        text = f"{self.title.strip()}\n{self.body.strip()}"
        self.content_hash = hashlib.sha256(text.encode()).hexdigest()
        return self.content_hash


class ArticleChunk(TenantOwnedModel):
    """A piece of an article (split by heading, bounded in tokens) that retrieval ranks."""

    article = models.ForeignKey(
        Article, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("article")
    )
    ordinal = models.PositiveIntegerField(verbose_name=_("ordinal"))
    heading = models.CharField(max_length=300, blank=True, verbose_name=_("heading"))
    text = models.TextField(verbose_name=_("text"))
    tokens = models.PositiveIntegerField(default=0, verbose_name=_("tokens"))
    language = models.CharField(max_length=16, blank=True, default="", verbose_name=_("language"))
    # PostgreSQL full-text search, filled by the indexer; GIN-indexed on PostgreSQL only.
    search_vector = SearchVectorField(null=True, blank=True, editable=False)
    # The provider's embedding (EMBEDDING_MODEL), when one is set.
    embedding = models.JSONField(null=True, blank=True, editable=False, verbose_name=_("embedding"))
    embedding_model = models.CharField(
        max_length=100, blank=True, editable=False, verbose_name=_("embedding model")
    )

    class Meta:
        verbose_name = _("article chunk")
        verbose_name_plural = _("article chunks")
        ordering = ["article", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["article", "ordinal"], name="uniq_chunk_ordinal")
        ]
        indexes = [models.Index(fields=["client", "language"], name="knowledge_chunk_language")]

    def __str__(self) -> str:
        return f"{self.article_id}#{self.ordinal}"


class FaqManager(models.Manager["FAQ"]):
    def get_queryset(self) -> models.QuerySet[FAQ]:
        faqs = ArticleQuerySet(self.model, using=self._db).filter(kind=ArticleKind.FAQ)
        return cast("models.QuerySet[FAQ]", faqs)


class FAQ(Article):
    """The FAQs (articles of kind FAQ) as their own admin page: question and answer."""

    objects = FaqManager.from_queryset(ArticleQuerySet)()  # type: ignore[misc,arg-type,assignment]

    class Meta:
        proxy = True
        verbose_name = _("FAQ")
        verbose_name_plural = _("FAQs")
