from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MailConfig(AppConfig):
    name = "apps.mail"
    label = "mail"
    verbose_name = _("E-mail channel")

    def ready(self) -> None:
        # A turn that replied in an e-mail conversation: the reasoning app announces it on the
        # kernel's outbound hook (it must not import this app); the reply is e-mailed from
        # here. Importing the reply tasks registers their names in every process.
        # A staff reply in an e-mail conversation: the conversations app emits
        # `message.created` on the same hook, and its e-mail is queued from here
        # (apps/mail/staff_replies.py, whose task registers on import).
        from apps.core import outbound
        from apps.mail import outbound_tasks  # noqa: F401
        from apps.mail.services.outbound import turn_replied_receive
        from apps.mail.staff_replies import staff_reply_receive

        outbound.connect(turn_replied_receive)
        outbound.connect(staff_reply_receive)
