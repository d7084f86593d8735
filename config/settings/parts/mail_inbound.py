"""The e-mail channel's inbound transports (docs/email-inbound.md): the providers' webhooks and
IMAP polling, on the background queue."""

from config.settings.parts.celery import BACKGROUND_QUEUE, CELERY_BEAT_SCHEDULE, CELERY_TASK_ROUTES
from config.settings.parts.core import env

# The largest post /mail/inbound/<token>/ reads (one e-mail with its attachments, as the
# provider encodes it: base64 adds a third); larger gets 413. The ASGI edge bounds that path to
# the same figure (config/asgi.py).
MAIL_INBOUND_MAX_BYTES = env.int("MAIL_INBOUND_MAX_BYTES", default=40 * 1024 * 1024)
# Mailgun signs a timestamp and a one-time token: a post whose timestamp is further than this
# from now, or whose token was seen before, is a replay (403).
MAIL_WEBHOOK_MAX_AGE_SECONDS = env.int("MAIL_WEBHOOK_MAX_AGE_SECONDS", default=300)
# IMAP polling: how often the beat fans out one poll per enabled IMAP channel; the most mails
# one poll reads from a channel (the rest wait for the next poll); the connection's timeout;
# at most this many polls of one client's channels are queued per beat run.
MAIL_IMAP_POLL_SECONDS = env.int("MAIL_IMAP_POLL_SECONDS", default=60)
MAIL_IMAP_BATCH = env.int("MAIL_IMAP_BATCH", default=50)
MAIL_IMAP_TIMEOUT_SECONDS = env.float("MAIL_IMAP_TIMEOUT_SECONDS", default=30.0)
MAIL_IMAP_CHANNELS_PER_CLIENT = env.int("MAIL_IMAP_CHANNELS_PER_CLIENT", default=5)
CELERY_BEAT_SCHEDULE["mail-imap-poll"] = {
    "task": "mail.imap_poll",
    "schedule": MAIL_IMAP_POLL_SECONDS,
}
# Never a turn's lane: the turns the polled mails start go to the default queue as usual.
CELERY_TASK_ROUTES.update(
    {name: {"queue": BACKGROUND_QUEUE} for name in ("mail.imap_poll", "mail.imap_poll_channel")}
)
