"""Notes written before this release by the assistant or the insights job, and never approved by
staff, leave the prompts: they go to `pending_review` (admin → Notes, "Waiting for approval").

Until then the pipeline's SUCCESS / FAILURE notes quoted the customer's message ("the customer
asked “…”", the webhook's error text) and the model's `add_note` could put a `failure` or
`success` note live unreviewed. Moving every such note (source `ai` or `insight`, `active`,
`reviewed_at` empty) is simpler and safer than guessing which ones quote a customer: staff see
them in admin → Notes, filtered by status, and approve what is worth keeping. The text is kept as
written so the reviewer can judge it; approved notes are masked when rendered into a prompt
(apps/notes/redaction.py). Notes staff wrote or approved stay active.

The per-client cache of recent active notes is keyed `notes:recent:v2:` from this release on, so
no process serves the old list.
"""

from django.db import migrations


def gate_unreviewed_ai_notes(apps, schema_editor):
    Note = apps.get_model("notes", "Note")
    Note.objects.filter(
        source__in=("ai", "insight"), status="active", reviewed_at__isnull=True
    ).update(status="pending_review")


class Migration(migrations.Migration):
    dependencies = [
        ("notes", "0002_help_texts_for_support_leads"),
    ]

    operations = [
        migrations.RunPython(gate_unreviewed_ai_notes, migrations.RunPython.noop, elidable=False),
    ]
