from django.urls import URLPattern, URLResolver, path

from apps.outcomes.apis import OutcomesApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("", OutcomesApi.as_view(), name="api-outcomes"),
]
