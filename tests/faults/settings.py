"""Settings for the processes the fault suite starts (a Celery worker, a WSGI server): the test
settings, pointed at the test database and the broker the test chose, with short deadlines and
leases so each fault plays out in seconds. Read from the environment the test sets."""

import faulthandler
import os
import signal

from config.settings.test import *  # noqa: F403
from config.settings.test import DATABASES, env

DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=True)

CELERY_TASK_ALWAYS_EAGER = not os.environ.get("CELERY_BROKER_URL")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "memory://localhost/"
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=5.0)

REASONING_TURN_DEADLINE_SECONDS = env.int("REASONING_TURN_DEADLINE_SECONDS", default=4)
CELERY_TASK_SOFT_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 2
CELERY_TASK_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 3
REASONING_TURN_LEASE_SECONDS = CELERY_TASK_TIME_LIMIT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": REASONING_TURN_LEASE_SECONDS + 1,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
    "socket_timeout": 3,
    "socket_connect_timeout": 2,
}
REASONING_SWEEP_INTERVAL_SECONDS = 1
CELERY_BEAT_SCHEDULE = {
    "reasoning-sweep-turns": {"task": "reasoning.sweep_turns", "schedule": 1.0},
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}

# `kill -USR2 <pid>` prints every thread's stack to the process log (debugging a stuck child).
faulthandler.register(signal.SIGUSR2, all_threads=True)
