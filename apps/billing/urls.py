from django.urls import URLPattern, URLResolver, path

from apps.billing.apis import InvoiceApi, TurnUsageListApi, UsageReportApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("usage/", UsageReportApi.as_view(), name="api-billing-usage"),
    path("invoice/", InvoiceApi.as_view(), name="api-billing-invoice"),
    path("turns/", TurnUsageListApi.as_view(), name="api-billing-turns"),
]
