"""Languages and time."""

from apps.core import language_packs
from config.settings.parts.core import BASE_DIR

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The shipped languages, each named in its own language: one per language pack
# (apps/core/language_packs/). Catalogues: locale/<code>/LC_MESSAGES/django.po, compiled with
# `make messages` (docs/languages.md).
LANGUAGES = language_packs.settings_languages()
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True
