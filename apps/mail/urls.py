"""The e-mail channel's public URLs: each channel's inbound webhook (apps/mail/views.py)."""

from django.urls import path

from apps.mail import views

app_name = "mail"

urlpatterns = [
    path("inbound/<str:token>/", views.inbound_webhook, name="inbound-webhook"),
]
