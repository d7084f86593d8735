"""Checks of our own: deployment (`manage.py check --deploy`) and the database's migration
history (run by `manage.py migrate` itself, and by `manage.py check --database default`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

# Backends that never deliver: the message ends up in the log, a file, memory or nowhere.
UNDELIVERED_EMAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend": "writes every e-mail to the server log",
    "django.core.mail.backends.filebased.EmailBackend": "writes every e-mail to a file",
    "django.core.mail.backends.locmem.EmailBackend": "keeps every e-mail in memory",
    "django.core.mail.backends.dummy.EmailBackend": "drops every e-mail",
}


@register(Tags.security, deploy=True)
def check_email_is_delivered(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Hand-off e-mails carry the customer's words and password-reset e-mails a sign-in link:
    in production they must go to a mail server, never to the log."""
    backend = settings.EMAIL_BACKEND
    what = UNDELIVERED_EMAIL_BACKENDS.get(backend)
    if what is None:
        return []
    return [
        Error(
            f"EMAIL_BACKEND is {backend}, which {what}.",
            hint=(
                "Set EMAIL_URL to your mail server, e.g. smtp+tls://user:password@smtp.example:587 "
                "(production settings require it)."
            ),
            id="guidedesk.E001",
        )
    ]


# The last main whose migration history still has every migration the squashed ones replace.
LAST_UNSQUASHED = "a5b730bd"


@register(Tags.database)
def check_no_half_applied_squash(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """Each app's migrations are squashed, and the files they replace are gone. A database that
    applied all of those counts as migrated, and a new one applies the squashed ones. A database
    that applied only some would be left short of columns without a word from Django (the
    missing ones no longer exist to apply), so `migrate` refuses it here instead."""
    if not databases:
        return []
    errors: list[CheckMessage] = []
    loader = MigrationLoader(None, ignore_no_migrations=True)
    squashed = {
        key: set(migration.replaces)
        for key, migration in loader.disk_migrations.items()
        if migration.replaces
    }
    for alias in databases:
        recorder = MigrationRecorder(connections[alias])
        if not recorder.has_table():
            continue
        applied = set(recorder.applied_migrations())
        for (app, name), replaced in sorted(squashed.items()):
            done = replaced & applied
            if done and done != replaced and (app, name) not in applied:
                errors.append(
                    Error(
                        f"Database {alias!r} has applied {len(done)} of the {len(replaced)} "
                        f"migrations that {app}.{name} replaces; {len(replaced - done)} are "
                        "missing and no longer ship.",
                        hint=(
                            f"Run `manage.py migrate` with GuideDesk {LAST_UNSQUASHED} (the last "
                            "release that ships them) first, then upgrade to this one."
                        ),
                        id="guidedesk.E002",
                    )
                )
    return errors
