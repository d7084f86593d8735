"""Content staff edit: articles, FAQs and the sources they come from. Every write of an article
goes through `article_save` (validated, hashed, saved, indexed), so the admin, the API, the
tenant file, imports and knowledge-gap drafts all leave the same trace.

Errors are `ApplicationError`s whose `extra["fields"]` names each bad field (the API answers
400 with them; the admin shows them on the field)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.languages import normalise
from apps.knowledge import sources
from apps.knowledge.models import (
    Article,
    ArticleKind,
    ArticleStatus,
    KnowledgeSource,
)
from apps.knowledge.services.indexing import article_index
from apps.knowledge.sources import is_http_url as is_http_url  # re-exported

MAX_TITLE_CHARS = 300
MAX_BODY_CHARS = 100_000
MAX_FAQ_ANSWER_CHARS = 5_000
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_LANGUAGE_CHARS = 16
MAX_RESYNC_HOURS = 24 * 365
# The article fields a caller may set (the rest are the server's).
ARTICLE_FIELDS = ("kind", "title", "body", "language", "tags", "enabled", "status", "source")
SOURCE_FIELDS = ("name", "kind", "url", "file", "language", "enabled", "resync_hours")


def _invalid(fields: dict[str, str]) -> ApplicationError:
    first, message = next(iter(fields.items()))
    return ApplicationError(
        f"{first}: {message}", {"fields": {name: [msg] for name, msg in fields.items()}}
    )


def clean_tags(value: Any) -> list[str]:
    """A list of short labels, stripped, without duplicates (first spelling kept); a
    comma-separated string is accepted too (the admin's text box)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        raise _invalid({"tags": _("A list of labels.")})
    tags: list[str] = []
    for tag in value:
        if not isinstance(tag, str):
            raise _invalid({"tags": _("Each label is text.")})
        tag = " ".join(tag.split())
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise _invalid(
                {"tags": _("At most %(n)d characters per label.") % {"n": MAX_TAG_CHARS}}
            )
        if tag.casefold() not in {t.casefold() for t in tags}:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise _invalid({"tags": _("At most %(n)d labels.") % {"n": MAX_TAGS}})
    return tags


def article_errors(article: Article) -> dict[str, str]:
    """Field → message for each problem with `article` as it is (empty when valid)."""
    errors: dict[str, str] = {}
    faq = article.kind == ArticleKind.FAQ
    if article.kind not in ArticleKind.values:
        errors["kind"] = _("One of: %(values)s.") % {"values": ", ".join(ArticleKind.values)}
    if article.status not in ArticleStatus.values:
        errors["status"] = _("One of: %(values)s.") % {"values": ", ".join(ArticleStatus.values)}
    if not article.title.strip():
        errors["title"] = _("The question is required.") if faq else _("A title is required.")
    elif len(article.title) > MAX_TITLE_CHARS:
        errors["title"] = _("At most %(n)d characters.") % {"n": MAX_TITLE_CHARS}
    limit = MAX_FAQ_ANSWER_CHARS if faq else MAX_BODY_CHARS
    if not article.body.strip():
        errors["body"] = _("The answer is required.") if faq else _("The text is required.")
    elif len(article.body) > limit:
        errors["body"] = _("At most %(n)d characters.") % {"n": limit}
    if len(article.language) > MAX_LANGUAGE_CHARS:
        errors["language"] = _("A language code such as en or de.")
    source = article.source if article.source_id is not None else None
    if source is not None and source.client_id != article.client_id:
        errors["source"] = _("No such source for this client.")
    return errors


@transaction.atomic
def article_save(*, article: Article, user: Any = None) -> Article:
    """Validate, hash and save `article` (new or changed), then (re)index it: its chunks are
    built again only when its title or text changed."""
    article.title = article.title.strip()
    article.body = article.body.strip()
    article.language = normalise(article.language)
    article.tags = clean_tags(article.tags or [])
    errors = article_errors(article)
    if errors:
        raise _invalid(errors)
    article.refresh_hash()
    article.save()
    article_index(article=article)
    return article


def article_create(*, client: Client, data: dict[str, Any], user: Any = None) -> Article:
    """A new article (or FAQ) of `client` from the given fields (`ARTICLE_FIELDS`)."""
    article = Article(client=client)
    return article_update(article=article, data=data, user=user)


def article_update(*, article: Article, data: dict[str, Any], user: Any = None) -> Article:
    """Change the given fields of `article` and save it through `article_save`. Publishing a
    draft this way records who approved it, like `article_publish`."""
    unknown = sorted(set(data) - set(ARTICLE_FIELDS))
    if unknown:
        raise _invalid({name: _("This field cannot be set.") for name in unknown})
    was_published = article.pk is not None and article.status == ArticleStatus.PUBLISHED
    for name, value in data.items():
        setattr(article, name, "" if value is None and name != "source" else value)
    if article.status == ArticleStatus.PUBLISHED and not was_published and user is not None:
        article.approved_by = user
        article.approved_at = timezone.now()
    return article_save(article=article, user=user)


def article_publish(*, article: Article, user: Any) -> Article:
    """Draft → published (it may reach prompts from now on), recording who approved it."""
    if article.status == ArticleStatus.PUBLISHED:
        return article
    article.status = ArticleStatus.PUBLISHED
    article.approved_by = user if getattr(user, "pk", None) else None
    article.approved_at = timezone.now()
    return article_save(article=article, user=user)


def article_set_enabled(*, article: Article, enabled: bool) -> Article:
    """Switch an article on or off for the assistant (its chunks stay; retrieval filters)."""
    if article.enabled != enabled:
        article.enabled = enabled
        Article.objects.for_client(article.client).filter(pk=article.pk).update(
            enabled=enabled, updated_at=timezone.now()
        )
    return article


def article_delete(*, article: Article) -> None:
    """Delete an article and its chunks."""
    Article.objects.for_client(article.client).filter(pk=article.pk).delete()


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------


def source_errors(source: KnowledgeSource) -> dict[str, str]:
    """Field → message for each problem with `source` (empty when valid)."""
    errors: dict[str, str] = {}
    if source.pk is None and source.client_id is not None:
        cap = int(settings.KNOWLEDGE_SOURCES_PER_CLIENT)
        if cap > 0 and KnowledgeSource.objects.for_client(source.client).count() >= cap:
            errors["sources"] = _(
                "This client already has %(n)d knowledge sources, the most allowed: delete one "
                "before adding another."
            ) % {"n": cap}
    if not source.name.strip():
        errors["name"] = _("A name is required.")
    elif len(source.name) > 200:
        errors["name"] = _("At most %(n)d characters.") % {"n": 200}
    kind = sources.get(source.kind)
    if kind is None:
        errors["kind"] = _("One of: %(values)s.") % {"values": ", ".join(sources.names())}
    else:
        errors.update(kind.errors(source))
    if len(source.language) > MAX_LANGUAGE_CHARS:
        errors["language"] = _("A language code such as en or de.")
    if not isinstance(source.resync_hours, int) or not (
        0 <= source.resync_hours <= MAX_RESYNC_HOURS
    ):
        errors["resync_hours"] = _("Between 0 and %(n)d hours.") % {"n": MAX_RESYNC_HOURS}
    return errors


@transaction.atomic
def source_save(*, source: KnowledgeSource) -> KnowledgeSource:
    source.name = source.name.strip()
    source.url = (source.url or "").strip()
    source.language = normalise(source.language)
    sources.kind_of(source.kind).prepare(source)
    if source.pk is None and source.client_id is not None:
        # one new source per client at a time, so KNOWLEDGE_SOURCES_PER_CLIENT holds
        Client.objects.select_for_update().filter(pk=source.client_id).first()
    errors = source_errors(source)
    if errors:
        raise _invalid(errors)
    source.save()
    return source


def source_create(*, client: Client, data: dict[str, Any]) -> KnowledgeSource:
    """A new source of `client`, of any registered kind (apps/knowledge/sources/)."""
    return source_update(source=KnowledgeSource(client=client), data=data)


def source_update(*, source: KnowledgeSource, data: dict[str, Any]) -> KnowledgeSource:
    unknown = sorted(set(data) - set(SOURCE_FIELDS))
    if unknown:
        raise _invalid({name: _("This field cannot be set.") for name in unknown})
    for name, value in data.items():
        setattr(source, name, "" if value is None else value)
    return source_save(source=source)


def source_delete(*, source: KnowledgeSource) -> None:
    """Delete a source with the articles it brought in (and their chunks)."""
    KnowledgeSource.objects.for_client(source.client).filter(pk=source.pk).delete()
