"""The settings every environment shares, one module per area (docs/architecture.md,
"Settings"). `config/settings/base.py` star-imports them all; a part imports what it needs from
the others (never in a cycle), no name is set by two parts, and a feature's periodic tasks are
added to `CELERY_BEAT_SCHEDULE` by the feature's own part."""
