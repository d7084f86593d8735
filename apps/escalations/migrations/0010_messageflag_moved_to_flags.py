# MessageFlag moved to the flags app (apps/flags/models.py). Only Django's state forgets it here;
# its table `escalations_messageflag`, rows and index stay, taken over by flags 0001.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('escalations', '0009_verbose_names_translated'),
        ('insights', '0008_proposal_flag_moved_to_flags'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(
                    model_name='messageflag',
                    name='escalations_client__05a2cc_idx',
                ),
                migrations.DeleteModel(
                    name='MessageFlag',
                ),
            ],
            database_operations=[],
        ),
    ]
