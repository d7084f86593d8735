import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("escalations", "0004_escalation_public_id"),
    ]

    operations = [
        migrations.AlterField(
            model_name="escalation",
            name="public_id",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
