from __future__ import annotations

import pytest

from apps.conversations.models import Channel
from apps.mail.models import Direction, Disposition, MailMessage
from tests.mail.conftest import CUSTOMER, email
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


def test_an_email_is_answered_by_email(mailbox, llm, smtp_sink):
    llm.script("assess", assess(response="Our opening hours are 9 to 5.", confidence=9))
    row = mailbox.send(email("Hello, when are you open?", subject="Opening hours"))
    assert row.disposition == Disposition.ACCEPTED
    assert row.conversation.channel == Channel.EMAIL
    [sent] = smtp_sink.wait(1)
    assert sent["Subject"] == "Re: Opening hours"
    assert sent["In-Reply-To"] == f"<{row.header_message_id}>"
    assert sent["Auto-Submitted"] == "auto-replied"
    assert "9 to 5" in sent.get_body(preferencelist=("plain",)).get_content()
    out = MailMessage.objects.for_client(row.client).get(direction=Direction.OUTBOUND)
    assert out.disposition == Disposition.SENT and out.to_addresses == [CUSTOMER]
