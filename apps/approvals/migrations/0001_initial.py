# The model the tools app created (tools 0004, 0006), taken over on its own table: state only,
# the table `tools_approvalrequest` and its rows stay as they are (tools 0011 forgets it there).

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('clients', '0022_merge_names'),
        ('conversations', '0013_verbose_names_translated'),
        ('reasoning', '0007_verbose_names_translated'),
        ('tools', '0011_approvalrequest_moved_to_approvals'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApprovalRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True, verbose_name='created at')),
                        ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated at')),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True, verbose_name='public id')),
                        ('params', models.JSONField(default=dict, verbose_name='params')),
                        ('params_hash', models.CharField(max_length=64, verbose_name='params hash')),
                        ('rule', models.JSONField(default=dict, help_text="The tool's approval rule when asked.", verbose_name='rule')),
                        ('basis', models.JSONField(blank=True, default=dict, help_text='Why a threshold rule asked: per scope, the sum and the calls it is made of, and which scopes went over the threshold.', verbose_name='basis')),
                        ('idempotency_key', models.CharField(max_length=80, unique=True, verbose_name='idempotency key')),
                        ('status', models.CharField(choices=[('pending', 'Waiting for a teammate'), ('approved', 'Approved'), ('denied', 'Denied'), ('expired', 'Timed out (handed to a person)'), ('withdrawn', 'Withdrawn by the customer')], default='pending', max_length=10, verbose_name='status')),
                        ('expires_at', models.DateTimeField(verbose_name='expires at')),
                        ('decided_at', models.DateTimeField(blank=True, null=True, verbose_name='decided at')),
                        ('reason', models.TextField(blank=True, help_text='Why it was denied (the customer is told).', verbose_name='reason')),
                        ('withdrawn_at', models.DateTimeField(blank=True, null=True, verbose_name='withdrawn at')),
                        ('withdrawn_because', models.CharField(blank=True, choices=[('', '—'), ('declined', 'The customer said no'), ('new_message', 'The customer wrote about something else')], default='', max_length=12, verbose_name='withdrawn because')),
                        ('finished_at', models.DateTimeField(blank=True, help_text='When the outcome was settled and the customer told: set once.', null=True, verbose_name='finished at')),
                        ('client', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clients.client', verbose_name='client')),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approval_requests', to='conversations.conversation', verbose_name='conversation')),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='decided by')),
                        ('execution', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='tools.toolexecution', verbose_name='execution')),
                        ('outcome_message', models.ForeignKey(blank=True, help_text='The message that told the customer the result (posted once).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.message', verbose_name='outcome message')),
                        ('pending_action', models.ForeignKey(blank=True, help_text="The customer's confirmation, for a destructive tool.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval_requests', to='tools.pendingaction', verbose_name='pending action')),
                        ('requested_in', models.ForeignKey(help_text='The customer message whose turn asked for the approval.', on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.message', verbose_name='requested in')),
                        ('tool', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tools.clienttool', verbose_name='tool')),
                        ('trace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='reasoning.reasoningtrace', verbose_name='trace')),
                        ('withdrawn_in', models.ForeignKey(blank=True, help_text='The customer message that withdrew the request.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.message', verbose_name='withdrawn in')),
                    ],
                    options={
                        'verbose_name': 'approval request',
                        'verbose_name_plural': 'approval requests',
                        'db_table': 'tools_approvalrequest',
                        'indexes': [models.Index(fields=['client', 'status', '-created_at'], name='tools_appro_client__1b3a88_idx'), models.Index(fields=['client', 'conversation'], name='tools_appro_client__8e7793_idx'), models.Index(fields=['status', 'expires_at'], name='tools_appro_status_49b8d1_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
