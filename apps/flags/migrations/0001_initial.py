# The model the escalations app created (escalations 0007), taken over on its own table: state
# only, the table `escalations_messageflag` and its rows stay as they are (escalations 0010
# forgets it there, once insights' foreign key points here).

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('clients', '0022_merge_names'),
        ('conversations', '0013_verbose_names_translated'),
        ('escalations', '0009_verbose_names_translated'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='MessageFlag',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True, verbose_name='created at')),
                        ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated at')),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True, verbose_name='public id')),
                        ('reason', models.CharField(choices=[('wrong', 'Wrong'), ('unhelpful', 'Unhelpful'), ('unsafe', 'Unsafe')], max_length=10, verbose_name='reason')),
                        ('correction', models.TextField(blank=True, help_text='What it should have said.', max_length=2000, verbose_name='correction')),
                        ('client', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clients.client', verbose_name='client')),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='flags', to='conversations.conversation', verbose_name='conversation')),
                        ('flagged_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='flagged by')),
                        ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='flags', to='conversations.message', verbose_name='message')),
                    ],
                    options={
                        'verbose_name': 'flagged answer',
                        'verbose_name_plural': 'flagged answers',
                        'db_table': 'escalations_messageflag',
                        'ordering': ['-created_at'],
                        'indexes': [models.Index(fields=['client', 'conversation'], name='escalations_client__05a2cc_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
