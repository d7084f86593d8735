"""Settings of the load benchmark's processes (benchmarks/load.py): the production settings,
with the per-IP throttle rates raised because every simulated customer connects from
127.0.0.1. Nothing else differs."""

from config.settings.production import *  # noqa: F403
from config.settings.production import REST_FRAMEWORK

REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_THROTTLE_RATES": {
        **REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
        "widget_ip": "1000000/min",
        "widget_key": "1000000/min",
        "widget_conversations": "1000000/min",
    },
}
