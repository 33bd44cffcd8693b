"""Hypothesis settings of the CI fuzz tests: a short budget, derandomized by default so that a
CI failure reproduces. ``KS_FUZZ_SEED=<int>`` explores another seed, ``KS_FUZZ_SCALE=<float>``
multiplies every ``max_examples`` (e.g. 10 for a longer local run)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("KS_FUZZ_SCALE", "1"))
SEED = os.environ.get("KS_FUZZ_SEED")


def fuzz_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max(1, int(max_examples * SCALE)),
        deadline=None,  # hangs are caught by per-example limits and pytest-timeout instead
        derandomize=SEED is None,
        database=None,  # no .hypothesis/ files from CI runs
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture],
    )


def maybe_seed(test):
    """Apply ``hypothesis.seed(KS_FUZZ_SEED)`` when the variable is set."""
    if SEED is None:
        return test
    from hypothesis import seed

    return seed(int(SEED))(test)
