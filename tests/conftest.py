"""Shared test set-up: the hypothesis profiles.

``ci`` (used when CI is set, as on the CI machine) is derandomized and has no
deadline, so a run is repeatable and a slow machine does not fail a test."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, derandomize=True, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
