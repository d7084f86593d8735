"""/api/v1/ routes of the e-mail channel (the inbound webhooks are in apps/mail/urls.py)."""

from django.urls import path

from apps.mail.apis import ConversationEmailsApi, MailChannelDetailApi, MailChannelListApi

urlpatterns = [
    path("mail-channels/", MailChannelListApi.as_view(), name="api-mail-channel-list"),
    path(
        "mail-channels/<str:channel_id>/",
        MailChannelDetailApi.as_view(),
        name="api-mail-channel-detail",
    ),
    path(
        "conversations/<str:public_id>/emails/",
        ConversationEmailsApi.as_view(),
        name="api-conversation-emails",
    ),
]
