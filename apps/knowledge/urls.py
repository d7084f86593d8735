"""/api/v1/knowledge/ — articles, FAQs and sources (docs/api.md "Knowledge")."""

from django.urls import path

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
    path("articles/", ArticleListCreateApi.as_view(), name="api-kb-article-list"),
    path("articles/<str:public_id>/", ArticleDetailApi.as_view(), name="api-kb-article-detail"),
    path("faqs/", FaqListCreateApi.as_view(), name="api-kb-faq-list"),
    path("faqs/<str:public_id>/", FaqDetailApi.as_view(), name="api-kb-faq-detail"),
    path("sources/", SourceListCreateApi.as_view(), name="api-kb-source-list"),
    path("sources/<str:public_id>/", SourceDetailApi.as_view(), name="api-kb-source-detail"),
    path("sources/<str:public_id>/sync", SourceSyncApi.as_view(), name="api-knowledge-source-sync"),
]
