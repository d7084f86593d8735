"""Staff / back-office knowledge API (docs/api.md "Knowledge"): articles, FAQs and sources —
list, read, create, replace, change and delete. Ids in URLs are public ids (UUIDs), looked up
within the caller's client: another client's id answers 404. Viewers read; agents write
articles and FAQs; admins manage sources (they make the server fetch addresses)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    ResourceSchema,
    choice_parameter,
    error_responses,
    found_by_public_id,
    invalid_example,
    public_id_path_parameter,
)
from apps.api.serializers import validated_body
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import Article, ArticleKind, ArticleStatus, KnowledgeSource
from apps.knowledge.selectors import article_get, articles_list, source_get, sources_list
from apps.knowledge.serializers import (
    ArticleFilterSerializer,
    ArticleSerializer,
    ArticleWriteSerializer,
    FaqFilterSerializer,
    FaqSerializer,
    FaqWriteSerializer,
    SourceSerializer,
    SourceSyncSerializer,
    SourceWriteSerializer,
)
from apps.knowledge.services.articles import (
    article_create,
    article_delete,
    article_update,
    source_create,
    source_delete,
    source_update,
)
from apps.knowledge.services.sync import empty_progress, source_sync_start
from apps.platform.parsers import JSONParser

ARTICLES_TAG = "knowledge articles"
FAQS_TAG = "knowledge faqs"
SOURCES_TAG = "knowledge sources"

ARTICLE_EXAMPLE: dict[str, Any] = {
    "id": "5b0e8f3c-2a71-4c55-9d1e-7f3a2b1c0d9e",
    "kind": "article",
    "title": "Returning an item",
    "body": "You can return unworn items within 30 days.\n\n## How\nStart at /returns.",
    "language": "en",
    "tags": ["returns", "policy"],
    "enabled": True,
    "status": "published",
    "source": None,
    "source_url": "",
    "approved_by": None,
    "approved_at": None,
    "created_at": "2026-03-02T09:15:30.000000Z",
    "updated_at": "2026-03-02T09:15:30.000000Z",
}
FAQ_EXAMPLE: dict[str, Any] = {
    "id": "0c7d9a1e-4b3f-4e2a-8c5d-6f7e8a9b0c1d",
    "question": "Do you ship abroad?",
    "answer": "Yes, to 30 countries.",
    "language": "en",
    "tags": [],
    "enabled": True,
    "status": "published",
    "approved_by": None,
    "approved_at": None,
    "created_at": "2026-03-02T09:15:30.000000Z",
    "updated_at": "2026-03-02T09:15:30.000000Z",
}
SOURCE_EXAMPLE: dict[str, Any] = {
    "id": "7e6d5c4b-3a29-4817-9605-f4e3d2c1b0a9",
    "name": "Help centre",
    "kind": "sitemap",
    "url": "https://shop.example/sitemap.xml",
    "file": "",
    "language": "en",
    "enabled": True,
    "resync_hours": 24,
    "status": "synced",
    "last_synced_at": "2026-03-02T09:20:00.000000Z",
    "error": "",
    "progress": {"done": 42, "total": 42},
    "articles": 42,
    "created_at": "2026-03-02T09:15:30.000000Z",
    "updated_at": "2026-03-02T09:20:00.000000Z",
}

ARTICLE_ID = public_id_path_parameter("public_id", "The article's public id.")
FAQ_ID = public_id_path_parameter("public_id", "The FAQ's public id.")
SOURCE_ID = public_id_path_parameter("public_id", "The source's public id.")
COMMON_FILTERS = [
    OpenApiParameter("q", OpenApiTypes.STR, description="Words in the title or text."),
    choice_parameter("status", ArticleStatus, "Only this status."),
    OpenApiParameter("enabled", OpenApiTypes.BOOL, description="Only switched on (or off)."),
    OpenApiParameter("language", OpenApiTypes.STR, description="Only this language (exactly)."),
]
ARTICLE_FILTERS = [
    *COMMON_FILTERS,
    choice_parameter("kind", ArticleKind, "Only this kind."),
    OpenApiParameter("tag", OpenApiTypes.STR, description="Only articles with this tag."),
    OpenApiParameter("source", OpenApiTypes.UUID, description="Only this source's articles."),
    CLIENT_PARAMETER,
]


ARTICLES = ResourceSchema(
    "knowledge_articles",
    ARTICLES_TAG,
    ARTICLE_ID,
    serializer=ArticleSerializer,
    example=ARTICLE_EXAMPLE,
    example_name="An article",
)
FAQS = ResourceSchema(
    "knowledge_faqs",
    FAQS_TAG,
    FAQ_ID,
    serializer=FaqSerializer,
    example=FAQ_EXAMPLE,
    example_name="An FAQ",
)
SOURCES = ResourceSchema(
    "knowledge_sources",
    SOURCES_TAG,
    SOURCE_ID,
    serializer=SourceSerializer,
    example=SOURCE_EXAMPLE,
    example_name="A source",
)


def _article_or_404(client: Any, public_id: str, kind: str | None = None) -> Article:
    return found_by_public_id(article_get, public_id, client=client, kind=kind)


def _source_or_404(client: Any, public_id: str) -> KnowledgeSource:
    return found_by_public_id(source_get, public_id, client=client)


def _named_source(client: Any, public_id: Any) -> KnowledgeSource:
    """The client's source a request names in its `source` field (body or query); a 400 naming
    that field when the client has none by that id."""
    source = source_get(client=client, public_id=public_id)
    if source is None:
        raise ApplicationError(
            "source: No such source for this client.",
            {"fields": {"source": ["No such source for this client."]}},
        )
    return source


def _article_body(request: Request, client: Any, *, partial: bool) -> dict[str, Any]:
    data = validated_body(ArticleWriteSerializer, request, partial=partial)
    if data.get("source") is not None:
        data["source"] = _named_source(client, data["source"])
    return data


def _faq_body(request: Request, *, partial: bool) -> dict[str, Any]:
    body = FaqWriteSerializer(data=request.data, partial=partial)
    body.is_valid(raise_exception=True)
    return body.article_data()


def _article_json(client: Any, article: Article) -> dict[str, Any]:
    fresh = article_get(client=client, public_id=article.public_id)
    return dict(ArticleSerializer(fresh).data)


def _faq_json(client: Any, article: Article) -> dict[str, Any]:
    fresh = article_get(client=client, public_id=article.public_id)
    return dict(FaqSerializer(fresh).data)


def _source_json(client: Any, source: KnowledgeSource) -> dict[str, Any]:
    return dict(SourceSerializer(source_get(client=client, public_id=source.public_id)).data)


# ------------------------------------------------------------------------------------ articles


class ArticleListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @ARTICLES.list_page(
        "List articles",
        "The client's knowledge articles and FAQs by title, one page at a time "
        "(`kind=article` for articles only; the FAQ endpoints show FAQs as question and "
        "answer). Only published, enabled articles of enabled sources reach the assistant. "
        "Needs the viewer role.",
        parameters=ARTICLE_FILTERS,
        invalid=invalid_example("kind", '"poem" is not valid.'),
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(ArticleFilterSerializer)
        if "source" in filters:
            filters["source"] = _named_source(self.client, filters["source"])
        queryset = articles_list(client=self.client, **filters)
        return self.paginated_response(queryset, ArticleSerializer)

    @ARTICLES.create(
        "Write an article",
        "Adds an article (Markdown text), published and enabled unless said "
        "otherwise, and indexes it for retrieval. Needs the agent role.",
        request=ArticleWriteSerializer,
        invalid=("title", "A title is required."),
        requests={
            "An article": {
                "title": "Returning an item",
                "body": "You can return unworn items within 30 days.",
                "tags": ["returns"],
            }
        },
    )
    def post(self, request: Request) -> Response:
        data = _article_body(request, self.client, partial=False)
        article = article_create(client=self.client, data=data, user=acting_user(request))
        return Response(_article_json(self.client, article), status=status.HTTP_201_CREATED)


class ArticleDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PUT": SUPPORT, "PATCH": SUPPORT, "DELETE": SUPPORT}

    @ARTICLES.retrieve("Read an article", "One article (or FAQ). Needs the viewer role.")
    def get(self, request: Request, public_id: str) -> Response:
        return Response(ArticleSerializer(_article_or_404(self.client, public_id)).data)

    def _write(self, request: Request, public_id: str, *, partial: bool) -> Response:
        article = _article_or_404(self.client, public_id)
        data = _article_body(request, self.client, partial=partial)
        article = article_update(article=article, data=data, user=acting_user(request))
        return Response(_article_json(self.client, article))

    @ARTICLES.update(
        "Replace an article",
        "Sets the article's title and text (both required) and the other given "
        "fields; it is indexed again when its title or text changed. Publishing a draft "
        "(`status: published`) records who approved it. Needs the agent role.",
        request=ArticleWriteSerializer,
        partial=False,
        invalid=("body", "The text is required."),
        updated=ARTICLE_EXAMPLE,
    )
    def put(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=False)

    @ARTICLES.update(
        "Change an article",
        'Changes the given fields only, e.g. `{"enabled": false}` to keep it '
        'from the assistant or `{"status": "published"}` to approve a draft (who approved '
        "is recorded). Needs the agent role.",
        request=ArticleWriteSerializer(partial=True),
        invalid=("content_hash", "This field cannot be set."),
        requests={"Switch off": {"enabled": False}},
        updated=ARTICLE_EXAMPLE,
    )
    def patch(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=True)

    @ARTICLES.destroy(
        "Delete an article",
        "Deletes the article and its indexed chunks (switch it off instead to keep "
        "it). An article of a source comes back at the source's next sync unless the page is "
        "gone. Needs the agent role.",
    )
    def delete(self, request: Request, public_id: str) -> Response:
        article_delete(article=_article_or_404(self.client, public_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------------------------------- FAQs


class FaqListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @FAQS.list_page(
        "List FAQs",
        "The client's FAQs (question and answer) by question, one page at a time. "
        "Needs the viewer role.",
        parameters=[*COMMON_FILTERS, CLIENT_PARAMETER],
        filtered=True,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(
            articles_list, FaqSerializer, filters=FaqFilterSerializer, kind=ArticleKind.FAQ
        )

    @FAQS.create(
        "Add an FAQ",
        "Adds a question and its answer (published and enabled unless said "
        "otherwise). Needs the agent role.",
        request=FaqWriteSerializer,
        invalid=("answer", "This field is required."),
        requests={"An FAQ": {"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."}},
    )
    def post(self, request: Request) -> Response:
        data = {**_faq_body(request, partial=False), "kind": ArticleKind.FAQ}
        article = article_create(client=self.client, data=data, user=acting_user(request))
        return Response(_faq_json(self.client, article), status=status.HTTP_201_CREATED)


class FaqDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PUT": SUPPORT, "PATCH": SUPPORT, "DELETE": SUPPORT}

    @FAQS.retrieve("Read an FAQ", "One FAQ. Needs the viewer role.")
    def get(self, request: Request, public_id: str) -> Response:
        return Response(FaqSerializer(_article_or_404(self.client, public_id, "faq")).data)

    def _write(self, request: Request, public_id: str, *, partial: bool) -> Response:
        article = _article_or_404(self.client, public_id, ArticleKind.FAQ)
        data = _faq_body(request, partial=partial)
        article = article_update(article=article, data=data, user=acting_user(request))
        return Response(_faq_json(self.client, article))

    @FAQS.update(
        "Replace an FAQ",
        "Sets the question and answer (both required) and the other given fields. "
        "Needs the agent role.",
        request=FaqWriteSerializer,
        partial=False,
        updated=FAQ_EXAMPLE,
    )
    def put(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=False)

    @FAQS.update(
        "Change an FAQ",
        "Changes the given fields only. Needs the agent role.",
        request=FaqWriteSerializer(partial=True),
        requests={"New answer": {"answer": "Yes."}},
        updated=FAQ_EXAMPLE,
    )
    def patch(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=True)

    @FAQS.destroy("Delete an FAQ", "Deletes the FAQ. Needs the agent role.")
    def delete(self, request: Request, public_id: str) -> Response:
        article_delete(article=_article_or_404(self.client, public_id, ArticleKind.FAQ))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ------------------------------------------------------------------------------------- sources

SOURCE_WRITE_DESCRIPTION = (
    " JSON, or multipart/form-data to upload a file (`kind: file`; .md, .markdown, .html, "
    ".htm, .pdf or .txt). A `url` or `sitemap` source needs an http(s) address."
)


class SourceListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": MANAGE}
    parser_classes = [JSONParser, MultiPartParser]

    @SOURCES.list_page(
        "List sources",
        "Where the client's articles come from — typed in by staff, a web page, a "
        "sitemap or an uploaded file — each with its sync status, last sync and error. Needs "
        "the viewer role.",
    )
    def get(self, request: Request) -> Response:
        return self.list_response(sources_list, SourceSerializer)

    @SOURCES.create(
        "Add a source",
        "Adds a source (status `new` until it is synced)."
        + SOURCE_WRITE_DESCRIPTION
        + " Needs the admin role.",
        request={
            "application/json": SourceWriteSerializer,
            "multipart/form-data": SourceWriteSerializer,
        },
        invalid=("url", "An http:// or https:// address."),
        requests={
            "A sitemap": {
                "name": "Help centre",
                "kind": "sitemap",
                "url": "https://shop.example/sitemap.xml",
            }
        },
    )
    def post(self, request: Request) -> Response:
        body = validated_body(SourceWriteSerializer, request)
        source = source_create(client=self.client, data=body)
        return Response(_source_json(self.client, source), status=status.HTTP_201_CREATED)


class SourceDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PUT": MANAGE, "PATCH": MANAGE, "DELETE": MANAGE}
    parser_classes = [JSONParser, MultiPartParser]

    @SOURCES.retrieve("Read a source", "One source with its sync status. Needs the viewer role.")
    def get(self, request: Request, public_id: str) -> Response:
        return Response(SourceSerializer(_source_or_404(self.client, public_id)).data)

    def _write(self, request: Request, public_id: str, *, partial: bool) -> Response:
        source = _source_or_404(self.client, public_id)
        body = validated_body(SourceWriteSerializer, request, partial=partial)
        source = source_update(source=source, data=body)
        return Response(_source_json(self.client, source))

    @SOURCES.update(
        "Replace a source",
        "Sets the source's name and kind (required) and the other given fields."
        + SOURCE_WRITE_DESCRIPTION
        + " Needs the admin role.",
        request={
            "application/json": SourceWriteSerializer,
            "multipart/form-data": SourceWriteSerializer,
        },
        partial=False,
        updated=SOURCE_EXAMPLE,
    )
    def put(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=False)

    @SOURCES.update(
        "Change a source",
        'Changes the given fields only, e.g. `{"enabled": false}` to keep all of '
        "its articles from the assistant. Needs the admin role.",
        request={
            "application/json": SourceWriteSerializer(partial=True),
            "multipart/form-data": SourceWriteSerializer(partial=True),
        },
        requests={"Switch off": {"enabled": False}},
        updated=SOURCE_EXAMPLE,
    )
    def patch(self, request: Request, public_id: str) -> Response:
        return self._write(request, public_id, partial=True)

    @SOURCES.destroy(
        "Delete a source",
        "Deletes the source and every article it brought in. Needs the admin role.",
    )
    def delete(self, request: Request, public_id: str) -> Response:
        source_delete(source=_source_or_404(self.client, public_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- importing: start a source's sync -------------------------------------------------------

SYNC_EXAMPLE: dict[str, Any] = {
    "id": "0b8f3c1e-6a2d-4d7e-9f10-2c5b7a9e1d34",
    "name": "Help centre",
    "kind": "sitemap",
    "status": "queued",
    "last_synced_at": "2026-03-01T03:00:12.000000Z",
    "error": "",
    "progress": empty_progress("Waiting to sync."),
}


class SourceSyncApi(StaffAPIView):
    required_roles = {"POST": MANAGE}

    @SOURCES.operation(
        "sync",
        "Sync a source now",
        "Queues an import of the source (a web page, a sitemap or an uploaded "
        "file) and answers 202 with its status and progress; GET the source (or POST again: "
        "a source already queued or syncing is not queued twice) to follow `progress`. "
        "Pages whose text did not change are left alone; pages gone from a sitemap are "
        "switched off. 400 for a source typed in by staff or an address that may not be "
        'fetched (docs/knowledge.md, "Importing"). Needs the admin role.',
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
