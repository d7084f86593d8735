"""Staff accounts: authentication, django-allauth (login limits, MFA)."""

from config.settings.parts.core import env

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Session-backed messages: a new API key's secret, shown once in an admin message, must never
# travel in a (signed but readable) cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "/admin/"

# django-allauth: e-mail login, no open sign-up (staff accounts are created by an operator),
# TOTP MFA with recovery codes available to every staff user.
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_EMAIL_VERIFICATION = "optional"
ACCOUNT_ADAPTER = "apps.accounts.adapters.StaffAccountAdapter"
# Login limits (allauth's syntax: "<n>/<period>/<ip|key|user>", comma-separated; the key of
# login_failed is the e-mail address). Per address, so they need TRUSTED_PROXY_COUNT behind a proxy.
ACCOUNT_RATE_LIMITS = {
    "login": env("ACCOUNT_RATE_LIMIT_LOGIN", default="30/m/ip"),
    "login_failed": env("ACCOUNT_RATE_LIMIT_LOGIN_FAILED", default="10/m/ip,5/5m/key"),
    "reset_password": env("ACCOUNT_RATE_LIMIT_RESET_PASSWORD", default="20/m/ip,5/m/key"),
}
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = "GuideDesk"
# A code typed as its 30-second step turns over is still taken: one step either side, as
# RFC 6238 §5.2 recommends for the delay between reading a code and it arriving.
MFA_TOTP_TOLERANCE = 1
# Platform superusers must set up TOTP before using the admin, console or staff API (clients
# can require it of their staff with Client.require_mfa). Off in local/demo settings.
MFA_REQUIRED_FOR_SUPERUSERS = env.bool("MFA_REQUIRED_FOR_SUPERUSERS", default=True)
