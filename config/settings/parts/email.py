"""Outgoing e-mail and the address staff reach GuideDesk at."""

from config.settings.parts.core import env

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="GuideDesk <noreply@guidedesk.example>")
# GuideDesk's own address as staff reach it (scheme, host, optional port; no path): e-mails
# written outside a request (hand-off notifications) link to the console with it. Empty: the
# first of ALLOWED_HOSTS over https (http for localhost / 127.0.0.1, with the demo's port 8000).
SITE_URL = env("SITE_URL", default="")
