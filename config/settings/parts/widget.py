"""The chat widget: e-mailed staff replies, the customer's address, e-mail one-time codes."""

from config.settings.parts.celery import CELERY_BEAT_SCHEDULE
from config.settings.parts.core import env

# Staff replies a customer has not seen in the widget this many seconds after they were sent are
# e-mailed to the address the customer left (one e-mail per batch; docs/widget.md).
WIDGET_REPLY_EMAIL_DELAY_SECONDS = env.float("WIDGET_REPLY_EMAIL_DELAY_SECONDS", default=180.0)
# The address is used only once the customer confirms it with the link we e-mail: the link is
# valid this long, and at most this many confirmation e-mails go to one address, and for one
# conversation, per hour (docs/widget.md "The e-mail address").
WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS = env.int("WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS", default=48)
WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR = env.int("WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR", default=3)
# The e-mail one-time code (apps/identity; docs/widget.md "E-mail one-time code"): at most this
# many codes per address, and per visitor (their conversation, or their widget visitor id), per
# hour. A code lives 10 minutes and dies after 5 wrong tries (fixed: docs/privacy.md).
EMAIL_CODES_PER_ADDRESS_PER_HOUR = env.int("EMAIL_CODES_PER_ADDRESS_PER_HOUR", default=3)
EMAIL_CODES_PER_VISITOR_PER_HOUR = env.int("EMAIL_CODES_PER_VISITOR_PER_HOUR", default=5)
# E-mail one-time codes older than 24 hours are deleted (apps/identity; docs/privacy.md).
CELERY_BEAT_SCHEDULE["identity-purge-email-codes"] = {
    "task": "identity.purge_email_codes",
    "schedule": 60 * 60,
}
