"""Texts of Django's own admin templates that Django 6.0's catalogues leave untranslated (its
Spanish one among them). Marked here so that `makemessages` keeps them in our catalogues, which
come first (settings.LOCALE_PATHS): the admin then reads them in the staff member's language."""

from __future__ import annotations

from django.utils.translation import gettext_noop

DJANGO_ADMIN_TEXTS = (
    gettext_noop("Search %(name)s"),
    gettext_noop("Pagination %(name)s"),
    gettext_noop("Pagination %(name)s entries"),
    gettext_noop(
        "Are you sure you want to delete the %(object_name)s “%(escaped_object)s”? All of the "
        "following related items will be deleted:"
    ),
    gettext_noop(
        "Deleting the %(object_name)s “%(escaped_object)s” would require deleting the following "
        "protected related objects:"
    ),
)
