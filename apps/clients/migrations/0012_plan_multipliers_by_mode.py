"""A plan's per-mode billing multipliers move from one column per mode to one JSON field (mode
name → decimal string), so a new mode needs no column; every plan keeps its values."""

from decimal import Decimal

from django.db import migrations, models

import apps.clients.models
import apps.clients.modes

COLUMNS = {
    "standard": ("multiplier_standard", Decimal("1.0")),
    "adaptive": ("multiplier_adaptive", Decimal("1.5")),
    "deliberative": ("multiplier_deliberative", Decimal("2.5")),
}


def _text(value):
    return format(Decimal(str(value)).quantize(Decimal("0.001")), "f")


def columns_to_json(apps, schema_editor):
    Plan = apps.get_model("clients", "Plan")
    for plan in Plan.objects.all():
        plan.multipliers = {
            mode: _text(getattr(plan, column)) for mode, (column, _) in COLUMNS.items()
        }
        plan.save(update_fields=["multipliers"])


def json_to_columns(apps, schema_editor):
    Plan = apps.get_model("clients", "Plan")
    for plan in Plan.objects.all():
        stored = plan.multipliers or {}
        for mode, (column, default) in COLUMNS.items():
            setattr(plan, column, Decimal(str(stored.get(mode, default))))
        plan.save(update_fields=[column for column, _ in COLUMNS.values()])


class Migration(migrations.Migration):
    dependencies = [
        ("clients", "0011_playground_modes"),
    ]

    operations = [
        migrations.AddField(
            model_name="plan",
            name="multipliers",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Mode name → decimal string: billed = provider cost × the multiplier "
                "of the mode that ran. A mode not listed bills at its default.",
                validators=[apps.clients.models.validate_multipliers],
                verbose_name="billing multipliers",
            ),
        ),
        migrations.RunPython(columns_to_json, json_to_columns),
        migrations.RemoveField(model_name="plan", name="multiplier_adaptive"),
        migrations.RemoveField(model_name="plan", name="multiplier_deliberative"),
        migrations.RemoveField(model_name="plan", name="multiplier_standard"),
        migrations.AlterField(
            model_name="plan",
            name="ai_mode",
            field=models.CharField(
                choices=apps.clients.modes.mode_choices, default="standard", max_length=20
            ),
        ),
    ]
