"""Settings of the load benchmark's processes (benchmarks/load.py): the production settings,
with the throttle rates raised because every simulated customer connects from 127.0.0.1.
Nothing else differs."""

from typing import Any

from config.settings.production import *  # noqa: F403
from config.settings.production import REST_FRAMEWORK

_rates: dict[str, Any] = dict(REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])  # type: ignore[call-overload]
_rates.update(widget_ip="1000000/min", widget_key="1000000/min", widget_conversations="1000000/min")
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": _rates}
