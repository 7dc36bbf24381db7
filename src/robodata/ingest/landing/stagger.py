"""Staggered launch policy for batch runs (Dagster-free).

Launching thousands of batch runs at once makes every run worker hit the instance
database (run rows, a handful of events each) in the same second. The policy spreads
N launches so that at most `max_concurrent` runs start per `run_s` seconds (the
expected length of one run, i.e. a steady state of about `max_concurrent` in flight),
with random jitter inside each launch slot so replicas of a sensor do not align.

    policy = StaggerPolicy(max_concurrent=32, run_s=60.0, jitter=0.5, seed=7)
    offsets = launch_offsets(2000, policy)      # seconds from the first launch, sorted
    n_due = due_count(offsets, elapsed_s=12.0)  # how many should have been launched by now

Guarantee: launch i lies in slot [i*slot, i*slot + jitter*slot) with slot = run_s / max_concurrent,
so any window of `run_s` seconds holds at most `max_concurrent + 1` launches.
The sensor keeps `launched` in its cursor and emits `due_count(...) - launched` run requests per tick.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from robodata.config import require


@dataclass(frozen=True)
class StaggerPolicy:
    max_concurrent: int = 32  # launches per run_s window (~ runs in flight at steady state)
    run_s: float = 60.0  # expected duration of one batch run, seconds
    jitter: float = 0.5  # fraction of a slot used for random jitter, in [0, 1)
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.max_concurrent >= 1, f"StaggerPolicy.max_concurrent must be >= 1, got {self.max_concurrent}")
        require(self.run_s >= 0, f"StaggerPolicy.run_s must be >= 0, got {self.run_s}")
        require(0.0 <= self.jitter < 1.0, f"StaggerPolicy.jitter must be in [0, 1), got {self.jitter}")

    @property
    def slot_s(self) -> float:
        """Seconds between consecutive launch slots."""
        return self.run_s / self.max_concurrent

    def span_s(self, n: int) -> float:
        """Time from the first to the last slot start for n launches."""
        return max(n - 1, 0) * self.slot_s


def launch_offsets(n: int, policy: StaggerPolicy) -> list[float]:
    """Launch offsets (seconds from now, non-decreasing) for n runs under `policy`."""
    require(n >= 0, f"launch count must be >= 0, got {n}")
    rng = random.Random(policy.seed)
    slot = policy.slot_s
    width = policy.jitter * slot
    return [i * slot + (rng.random() * width if width > 0 else 0.0) for i in range(n)]


def due_count(offsets: list[float], elapsed_s: float) -> int:
    """How many of the (sorted) offsets are due after `elapsed_s` seconds."""
    return bisect.bisect_right(offsets, elapsed_s)


def max_in_window(offsets: list[float], window_s: float) -> int:
    """Largest number of launches in any half-open window of `window_s` seconds (sorted offsets)."""
    best, lo = 0, 0
    for hi, t in enumerate(offsets):
        while offsets[lo] <= t - window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


class StaggeredLaunch:
    """Resumable launch schedule for one wave of n runs (Stateful: keep state_dict() in the sensor cursor).

    wave = StaggeredLaunch(n=len(batches), policy=policy, started_at=now)
    k = wave.take(now)                 # runs to submit this tick
    submit(batches[wave.launched - k : wave.launched])
    cursor = json.dumps(wave.state_dict())
    """

    def __init__(self, n: int, policy: StaggerPolicy, started_at: float):
        require(n >= 0, f"launch count must be >= 0, got {n}")
        self.n, self.policy, self.started_at = n, policy, float(started_at)
        self.launched = 0
        self._offsets = launch_offsets(n, policy)

    @property
    def done(self) -> bool:
        return self.launched >= self.n

    def take(self, now: float) -> int:
        """Number of further runs due at time `now` (seconds, same clock as started_at); marks them launched."""
        k = max(due_count(self._offsets, now - self.started_at) - self.launched, 0)
        self.launched += k
        return k

    def state_dict(self) -> dict:
        p = self.policy
        return {
            "n": self.n,
            "started_at": self.started_at,
            "launched": self.launched,
            "policy": {"max_concurrent": p.max_concurrent, "run_s": p.run_s, "jitter": p.jitter, "seed": p.seed},
        }

    def load_state_dict(self, state: dict) -> None:
        policy = StaggerPolicy(**state["policy"])
        n, launched = int(state["n"]), int(state["launched"])
        require(0 <= launched <= n, f"StaggeredLaunch state: launched={launched} outside [0, {n}]")
        self.__init__(n, policy, float(state["started_at"]))  # type: ignore[misc]
        self.launched = launched
