# MessageFlag moved to the flags app on the same table: the foreign key's target changes in
# Django's state only (the column and its constraint already point at that table).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('flags', '0001_initial'),
        ('insights', '0007_run_now_fields_named'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='insightproposal',
                    name='flag',
                    field=models.ForeignKey(blank=True, help_text='Flagged answers: the flag it was made from.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='flags.messageflag', verbose_name='flag'),
                ),
            ],
            database_operations=[],
        ),
    ]
