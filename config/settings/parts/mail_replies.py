"""E-mail replies of the e-mail channel (docs/email.md): the send timeout and the beat task that
retries replies a mail server refused."""

from config.settings.parts.celery import BACKGROUND_QUEUE, CELERY_BEAT_SCHEDULE, CELERY_TASK_ROUTES
from config.settings.parts.core import env

# Each attempt's limit on talking to the mail server (connect, TLS, the SMTP dialogue).
MAIL_SEND_TIMEOUT_SECONDS = env.float("MAIL_SEND_TIMEOUT_SECONDS", default=30.0)
# How often the beat task sends the replies that are due (retries on their back-off).
MAIL_SEND_DUE_SECONDS = env.int("MAIL_SEND_DUE_SECONDS", default=60)
CELERY_BEAT_SCHEDULE["mail-send-due"] = {"task": "mail.send_due", "schedule": MAIL_SEND_DUE_SECONDS}
CELERY_TASK_ROUTES.update(
    {
        name: {"queue": BACKGROUND_QUEUE}
        for name in ("mail.reply_send", "mail.deliver", "mail.send_due")
    }
)
