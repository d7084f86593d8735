from django.urls import path

from apps.clients.apis import CurrentClientApi

urlpatterns = [
    path("client/", CurrentClientApi.as_view(), name="api-current-client"),
]
