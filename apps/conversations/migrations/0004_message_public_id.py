"""Messages get an opaque public id (issue 11.11): added nullable, filled for existing rows,
then made unique and required in the next migration (its own transaction: PostgreSQL
refuses to alter a table with pending trigger events from the updates)."""

import uuid

from django.db import migrations, models


def fill_public_ids(apps, schema_editor):
    Message = apps.get_model("conversations", "Message")
    batch = []
    for message in Message.objects.filter(public_id__isnull=True).only("pk").iterator():
        message.public_id = uuid.uuid4()
        batch.append(message)
        if len(batch) >= 1000:
            Message.objects.bulk_update(batch, ["public_id"])
            batch = []
    Message.objects.bulk_update(batch, ["public_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0003_conversation_turn_lock"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="public_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop, elidable=True),
    ]
