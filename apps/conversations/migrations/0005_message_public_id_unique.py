import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0004_message_public_id"),
    ]

    operations = [
        migrations.AlterField(
            model_name="message",
            name="public_id",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
