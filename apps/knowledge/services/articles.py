"""Saving articles. A minimal version for the import (the content work owns this module and
its full validation): `article_save` validates, refreshes the content hash, saves and indexes."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from apps.knowledge.models import Article
from apps.knowledge.services.indexing import article_index


@transaction.atomic
def article_save(*, article: Article, user: Any = None) -> Article:
    """Validate, refresh `content_hash`, save and (re)index `article`; returns it. Indexing is
    a no-op when the content did not change."""
    article.title = article.title.strip()
    if not article.title:
        raise ValidationError({"title": _("An article needs a title.")})
    if not article.body.strip():
        raise ValidationError({"body": _("An article needs a text.")})
    article.full_clean(
        exclude=["client", "source", "approved_by", "content_hash"], validate_unique=False
    )
    article.refresh_hash()
    article.save()
    article_index(article=article)
    return article


@transaction.atomic
def article_delete(*, article: Article) -> None:
    article.delete()
