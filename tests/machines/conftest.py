"""Hypothesis profiles for the state machines: fast for every CI run, deep with KIPCHECK_DEEP=1.

The machines read `settings.get_profile(MACHINE_PROFILE)`; registering here (and
not loading) leaves every other hypothesis test's settings alone.
"""

import os

from hypothesis import HealthCheck, settings

MACHINE_PROFILE = "kipcheck-machines"
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

settings.register_profile(f"{MACHINE_PROFILE}-fast", max_examples=100, stateful_step_count=35, derandomize=True,
                          database=None, **_COMMON)
settings.register_profile(f"{MACHINE_PROFILE}-deep", max_examples=2000, stateful_step_count=100, print_blob=True, **_COMMON)
settings.register_profile(MACHINE_PROFILE, settings.get_profile(
    f"{MACHINE_PROFILE}-deep" if os.environ.get("KIPCHECK_DEEP") == "1" else f"{MACHINE_PROFILE}-fast"))
