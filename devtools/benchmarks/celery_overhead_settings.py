"""The production settings with a few overridden, for devtools/benchmarks/celery_overhead.py
--setting: CELERY_OVERHEAD_SETTINGS is a JSON object of {setting name: Python literal}."""

import ast
import json
import os

from config.settings.production import *  # noqa: F403

for _name, _literal in json.loads(os.environ.get("CELERY_OVERHEAD_SETTINGS", "{}")).items():
    globals()[_name] = ast.literal_eval(_literal)
