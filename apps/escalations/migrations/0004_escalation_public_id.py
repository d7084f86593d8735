"""Escalations get an opaque public id (issue 11.11): added nullable, filled for existing rows,
then made unique and required in the next migration (its own transaction: PostgreSQL
refuses to alter a table with pending trigger events from the updates)."""

import uuid

from django.db import migrations, models


def fill_public_ids(apps, schema_editor):
    Escalation = apps.get_model("escalations", "Escalation")
    batch = []
    for escalation in Escalation.objects.filter(public_id__isnull=True).only("pk").iterator():
        escalation.public_id = uuid.uuid4()
        batch.append(escalation)
        if len(batch) >= 1000:
            Escalation.objects.bulk_update(batch, ["public_id"])
            batch = []
    Escalation.objects.bulk_update(batch, ["public_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("escalations", "0003_turn_failure_reasons"),
    ]

    operations = [
        migrations.AddField(
            model_name="escalation",
            name="public_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop, elidable=True),
    ]
