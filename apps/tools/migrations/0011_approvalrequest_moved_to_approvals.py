# ApprovalRequest moved to the approvals app (apps/approvals/models.py). Only Django's state
# forgets it here; its table `tools_approvalrequest`, rows and indexes stay, and the approvals
# app's initial migration takes the model over on the same table.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tools', '0010_wording_fields_named'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(
                    model_name='approvalrequest',
                    name='tools_appro_client__1b3a88_idx',
                ),
                migrations.RemoveIndex(
                    model_name='approvalrequest',
                    name='tools_appro_client__8e7793_idx',
                ),
                migrations.RemoveIndex(
                    model_name='approvalrequest',
                    name='tools_appro_status_49b8d1_idx',
                ),
                migrations.DeleteModel(
                    name='ApprovalRequest',
                ),
            ],
            database_operations=[],
        ),
    ]
