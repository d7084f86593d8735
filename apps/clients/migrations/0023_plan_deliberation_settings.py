"""The five deliberative-mode columns of Plan become one JSON object, `Plan.deliberation`
(apps/clients/deliberation.py); every plan keeps its values."""

from decimal import Decimal

from django.db import migrations, models

from apps.clients.deliberation import default_deliberation

COLUMNS = {
    "min_steps": "deliberation_min_steps",
    "max_steps": "deliberation_max_steps",
    "target": "deliberation_target",
    "refinement_iterations": "refinement_iterations",
    "refinement_stop_score": "refinement_stop_score",
}


def columns_to_json(apps, schema_editor):
    Plan = apps.get_model("clients", "Plan")
    for plan in Plan.objects.all():
        value = {key: getattr(plan, column) for key, column in COLUMNS.items()}
        if value["target"] is not None:
            value["target"] = float(value["target"])
        plan.deliberation = value
        plan.save(update_fields=["deliberation"])


def json_to_columns(apps, schema_editor):
    Plan = apps.get_model("clients", "Plan")
    defaults = default_deliberation()
    for plan in Plan.objects.all():
        value = {**defaults, **(plan.deliberation or {})}
        for key, column in COLUMNS.items():
            setattr(plan, column, value[key])
        if plan.deliberation_target is not None:
            plan.deliberation_target = Decimal(str(plan.deliberation_target))
        plan.save(update_fields=list(COLUMNS.values()))


class Migration(migrations.Migration):
    dependencies = [
        ("clients", "0022_merge_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="plan",
            name="deliberation",
            field=models.JSONField(
                blank=True,
                default=default_deliberation,
                editable=False,
                verbose_name="Deliberative mode",
            ),
        ),
        migrations.RunPython(columns_to_json, json_to_columns),
        migrations.RemoveField(model_name="plan", name="deliberation_min_steps"),
        migrations.RemoveField(model_name="plan", name="deliberation_max_steps"),
        migrations.RemoveField(model_name="plan", name="deliberation_target"),
        migrations.RemoveField(model_name="plan", name="refinement_iterations"),
        migrations.RemoveField(model_name="plan", name="refinement_stop_score"),
    ]
