"""How many examples the property tests of tests/unit run: one budget, chosen by HYPOTHESIS_PROFILE.

Why profiles: `make test-unit` is the loop while editing and must take seconds, while the same
properties deserve a long run somewhere. The thoroughness moves to `make fuzz`, it is not dropped:

- ``fast`` (the default; `make test-unit`, `make test`): a tenth of each test's own count.
- ``thorough`` (``HYPOTHESIS_PROFILE=thorough``; `make fuzz` runs tests/unit's properties with it):
  ten times each test's own count, so never fewer examples than the counts the tests pinned before.

A test that names its own count writes ``settings(max_examples=examples(N))``: N is the count the
test was written with (hypothesis's own default is 100), scaled here by the profile. A test without
a count runs the profile's ``max_examples`` (10 or 1,000). No profile has a deadline or the
``too_slow`` health check (machine load, not code, decides them).

Loaded by tests/unit/conftest.py before any test module is imported: `examples` reads the loaded
profile when a module's decorators run, so the profile must be chosen first.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "examples", "load_profile"]

#: hypothesis's own default count, the unit against which a profile's scale is read
_BASE_EXAMPLES = 100

#: fewest examples a property runs in any profile (or its own count if smaller)
_FLOOR = 10

#: profile name -> max_examples for a test that names no count (scale = value / 100)
PROFILES = {"fast": 10, "thorough": 1000}


def load_profile() -> str:
    """Register every profile and load the one HYPOTHESIS_PROFILE names (``fast`` when unset).

    An unknown name fails with the known ones listed, rather than silently running the default."""
    for name, count in PROFILES.items():
        # fast (the default, CI's) draws the same examples every run: a commit's verdict does not
        # hang on a seed; thorough (`make fuzz`) searches at random
        # and neither times anything: how fast a test or its input generation runs depends on the
        # machine's load (a unit run beside three chaos soaks, load 20, failed too_slow), not on the code;
        # speed is measured in tests/perf, not here. The other health checks stay.
        settings.register_profile(
            name,
            max_examples=count,
            derandomize=name == "fast",
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
    name = os.environ.get("HYPOTHESIS_PROFILE") or "fast"
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: expected one of {sorted(PROFILES)}")
    settings.load_profile(name)
    return name


def examples(n: int) -> int:
    """``n`` (a test's own example count) scaled by the loaded profile, at least min(n, 10)."""
    scaled = n * settings.default.max_examples // _BASE_EXAMPLES
    return max(min(n, _FLOOR), scaled)
