from django.urls import path

from apps.accounts.apis import ApiKeyListCreateApi, ApiKeyRevokeApi

urlpatterns = [
    path("api-keys/", ApiKeyListCreateApi.as_view(), name="api-key-list"),
    path("api-keys/<str:key_id>/revoke", ApiKeyRevokeApi.as_view(), name="api-key-revoke"),
]
