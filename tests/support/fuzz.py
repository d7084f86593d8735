"""Hypothesis settings for the schema fuzz tests (schemathesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def reproducible(max_examples: int) -> settings:
    """`max_examples` cases, the same on every run so that CI failures reproduce (derandomized,
    no example database), with no deadline and no health checks."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
