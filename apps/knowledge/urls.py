from django.urls import path

from apps.knowledge.apis import SourceSyncApi

urlpatterns = [
    # --- importing ---
    path(
        "sources/<str:public_id>/sync",
        SourceSyncApi.as_view(),
        name="api-knowledge-source-sync",
    ),
]
