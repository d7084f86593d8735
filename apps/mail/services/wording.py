"""The fixed words of the e-mails a customer receives (customer-facing: translated into every
shipped language, apps/core/catalogues.py): the reply's subject and a confirmation question as an
e-mail asks it — there are no Yes/No buttons in an e-mail, so it says to reply "yes"."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext

from apps.tools.models import ClientTool
from apps.tools.wording import action_details, display_name

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.conversations.models import Message

_REPLY_PREFIX = re.compile(r"^\s*((re|aw|sv|rv|antw|fw|fwd|wg)\s*(\[\d+\])?\s*:\s*)+", re.I)


def reply_subject(subject: str, *, client: Client) -> str:
    """ "Re: " and the thread's subject, without piling up prefixes ("Re: Re: AW:")."""
    base = _REPLY_PREFIX.sub("", subject or "").strip()
    if not base:
        base = gettext("Your message to %(name)s") % {"name": client.name}
    return f"Re: {base}"[:998]


def confirmation_text(*, client: Client, message: Message) -> str:
    """A confirmation question as an e-mail asks it: the exact action and its parameters,
    and how to answer — a reply with "yes" (there are no buttons in an e-mail)."""
    data = message.data or {}
    tool = ClientTool.objects.for_client(client).filter(name=data.get("tool") or "").first()
    raw = data.get("params")
    params: dict[str, Any] = raw if isinstance(raw, dict) else {}
    how = gettext(
        'To go ahead, reply to this e-mail with "yes" at the top; reply with "no" to stop. '
        "Nothing is done until you reply."
    )
    if tool is None:
        return f"{message.text}\n\n{how}"
    values = {"action": display_name(tool), "details": action_details(tool, params)}
    if data.get("reask"):
        lead = gettext("I didn't take that as a yes.")
    else:
        lead = gettext("Just to confirm before I do anything that can't be undone:")
    if values["details"]:
        ask = gettext("Shall I go ahead with “%(action)s” (%(details)s)?") % values
    else:
        ask = gettext("Shall I go ahead with “%(action)s”?") % values
    return f"{lead} {ask}\n\n{how}"
