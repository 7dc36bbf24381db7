"""What counts as a declared rate: shared by alignment and QC without importing either.

Kept free of numpy and the alignment code so the QC check names (and the Dagster definitions that
list them) load without the recording stack.
"""

from __future__ import annotations

import math

MAX_RATE_HZ = 1e5  # a declared rate above this (or <= 0, or not finite) is not a rate
DEFAULT_RATE_TOLERANCE = 0.15  # |measured / declared - 1| (QCThresholds.rate_tolerance)
# A rate no timestamp can check (step-array formats: step i is at i / fps) must be a control rate
# on its own: a step every 10 s at the slowest, 10 kHz at the fastest.
STEP_RATE_RANGE_HZ = (0.1, 1e4)


def declared_ok(nominal: float, measured: float, tol: float) -> bool:
    """A declared rate is a rate (finite, in (0, MAX_RATE_HZ]) within `tol` of the measured one (if any)."""
    if not (math.isfinite(nominal) and 0 < nominal <= MAX_RATE_HZ):
        return False
    return measured <= 0 or abs(measured / nominal - 1) <= tol
