"""The translation catalogues (locale/<lang>/LC_MESSAGES/django.po) and their compiled .mo
files, without GNU gettext: babel reads each .po and writes its .mo (`manage.py
compile_catalogues`, `make messages`). A fresh machine may lack msgfmt; the .mo files are
committed, and a test checks they match their .po files."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from django.conf import settings

from apps.core import language_packs


def plural_forms() -> dict[str, str]:
    """The gettext plural rule of every language pack (its `PLURAL_FORMS`): a catalogue's .po
    header must say exactly this."""
    return {pack.code: pack.plural_forms for pack in language_packs.packs()}


@dataclass(frozen=True)
class CatalogueFile:
    language: str
    po: Path

    @property
    def mo(self) -> Path:
        return self.po.with_suffix(".mo")


def locale_dir() -> Path:
    return Path(settings.LOCALE_PATHS[0])


def catalogue_files(root: Path | None = None) -> list[CatalogueFile]:
    """Every locale/<lang>/LC_MESSAGES/*.po, sorted."""
    base = root or locale_dir()
    return [
        CatalogueFile(language=po.parent.parent.name, po=po)
        for po in sorted(base.glob("*/LC_MESSAGES/*.po"))
    ]


def catalogue_read(po: Path) -> Catalog:
    with po.open("rb") as handle:
        return read_po(handle, abort_invalid=True)


def compiled_bytes(catalog: Catalog) -> bytes:
    """The .mo for `catalog` (fuzzy entries left out, like msgfmt)."""
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def catalogue_compile(entry: CatalogueFile, *, check: bool = False) -> bool:
    """Write `entry`'s .mo when it differs from its .po (or only report it with `check`).
    Returns True when the .mo was (or, with `check`, would be) changed."""
    wanted = compiled_bytes(catalogue_read(entry.po))
    current = entry.mo.read_bytes() if entry.mo.exists() else None
    if current == wanted:
        return False
    if not check:
        entry.mo.write_bytes(wanted)
    return True


# What a customer can see: the files whose msgids must be translated into every shipped
# language (a reference in any of them makes a msgid customer-facing). The staff side (admin,
# console, playground, simulations, notes, insights) is complete in Spanish and may fall back
# to English elsewhere.
CUSTOMER_FACING = (
    "apps/reasoning/guards.py",
    "apps/reasoning/turn.py",
    "apps/reasoning/replies.py",
    "apps/reasoning/services.py",
    "apps/approvals/services.py",
    "apps/approvals/withdrawal.py",
    "apps/reasoning/modes/",
    "apps/tools/",
    "apps/conversations/services.py",
    "apps/escalations/services.py",
    "apps/escalations/availability.py",  # when a person answers a hand-off
    "apps/identity/services.py",  # the e-mail one-time code: its replies and e-mail
    "apps/widget/apis.py",
    "apps/outcomes/services.py",  # the widget's rating answers
    "apps/mail/services/wording.py",  # the e-mails customers receive (the e-mail channel)
    "templates/widget/",
    "templates/privacy/",  # the export a customer receives
)
# Model labels and help texts of the tools app are shown in the admin and the staff API only.
_STAFF_FILES_IN_CUSTOMER_DIRS = ("apps/tools/admin.py", "apps/tools/models.py")


def is_customer_facing(reference: str) -> bool:
    """`reference` is a .po location (`path` or `path:line`)."""
    path = reference.rsplit(":", 1)[0] if reference[-1:].isdigit() else reference
    if path in _STAFF_FILES_IN_CUSTOMER_DIRS:
        return False
    return any(
        path == entry or (entry.endswith("/") and path.startswith(entry))
        for entry in CUSTOMER_FACING
    )
