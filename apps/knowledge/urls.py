"""/api/v1/knowledge/ — articles, FAQs and sources (docs/api.md "Knowledge")."""

from django.urls import path

from apps.api.routes import resource_routes
from apps.knowledge.apis import (
    ArticleDetailApi,
    ArticleListCreateApi,
    FaqDetailApi,
    FaqListCreateApi,
    SourceDetailApi,
    SourceListCreateApi,
    SourceSyncApi,
)

urlpatterns = [
    *resource_routes(
        "articles", "api-kb-article", list_view=ArticleListCreateApi, detail_view=ArticleDetailApi
    ),
    *resource_routes("faqs", "api-kb-faq", list_view=FaqListCreateApi, detail_view=FaqDetailApi),
    *resource_routes(
        "sources", "api-kb-source", list_view=SourceListCreateApi, detail_view=SourceDetailApi
    ),
    path("sources/<str:public_id>/sync", SourceSyncApi.as_view(), name="api-knowledge-source-sync"),
]
