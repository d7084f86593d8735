"""/api/v1/ routes of the e-mail channel (the inbound webhooks are in apps/mail/urls.py)."""

from apps.api.routes import resource_routes
from apps.mail.apis import ConversationEmailsApi, MailChannelDetailApi, MailChannelListApi

urlpatterns = [
    *resource_routes(
        "mail-channels",
        "api-mail-channel",
        id_name="channel_id",
        list_view=MailChannelListApi,
        detail_view=MailChannelDetailApi,
    ),
    *resource_routes(
        "conversations", "api-conversation", actions={"emails/": ConversationEmailsApi}
    ),
]
