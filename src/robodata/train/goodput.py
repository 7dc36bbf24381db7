"""Goodput accounting across restarts.

productive_s: step time (forward, backward, optimizer) of the steps that survive into the
              final model; steps redone after a restart count once.
data_wait_s:  time steps spent blocked on the loader.
lost_s:       per restart, the wall time from the checkpoint it resumed from until training
              resumed (work after the checkpoint that was thrown away + downtime + start-up).
wall_s:       wall time of the whole run, all attempts and the gaps between them.
goodput = productive_s / wall_s; data_wait_fraction = data_wait_s / (data_wait_s + productive_s).

The tracker is Stateful: it is saved in every checkpoint, so a resumed run keeps counting.
A heartbeat file (last finished step, rewritten each step by rank 0) tells a restart how
many steps were lost.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

FIELDS = ("productive_s", "data_wait_s", "checkpoint_s", "startup_s", "lost_s", "lost_steps", "restarts", "steps")


class GoodputTracker:
    def __init__(self, started_at: float | None = None):
        self.totals: dict[str, float] = {k: 0.0 for k in FIELDS}
        self.wall_base = 0.0  # wall time accounted before this attempt
        self.attempt_start = started_at if started_at is not None else time.time()
        self.lost_steps_last = 0

    # ---------------------------------------------------------------- recording
    def started(self) -> None:
        """Training loop about to run its first step of this attempt (after any resume)."""
        if self.totals["restarts"] == 0 and self.wall_base == 0.0:
            self.totals["startup_s"] += time.time() - self.attempt_start

    def step(self, data_wait_s: float, compute_s: float) -> None:
        self.totals["data_wait_s"] += data_wait_s
        self.totals["productive_s"] += compute_s
        self.totals["steps"] += 1

    def checkpointed(self, seconds: float) -> None:
        self.totals["checkpoint_s"] += seconds

    def resumed(self, state: dict[str, Any], checkpoint_step: int, heartbeat_step: int | None) -> None:
        """Continue the ledger from a checkpoint; charge the gap since it to restarts."""
        self.load_state_dict(state)
        now = time.time()
        lost = max(0.0, now - float(state["saved_at"]))
        self.lost_steps_last = max(0, (heartbeat_step or checkpoint_step) - checkpoint_step)
        self.totals["lost_s"] += lost
        self.totals["lost_steps"] += self.lost_steps_last
        self.totals["restarts"] += 1
        self.wall_base = float(state["wall_s"]) + lost
        self.attempt_start = now

    # ---------------------------------------------------------------- reporting
    def wall_s(self) -> float:
        return self.wall_base + (time.time() - self.attempt_start)

    def report(self) -> dict[str, float]:
        t = self.totals
        wall = self.wall_s()
        busy = t["productive_s"] + t["data_wait_s"]
        return {
            "goodput": round(t["productive_s"] / wall, 4) if wall > 0 else 0.0,
            "data_wait_fraction": round(t["data_wait_s"] / busy, 4) if busy > 0 else 0.0,
            "wall_s": round(wall, 3),
            "productive_s": round(t["productive_s"], 3),
            "data_wait_s": round(t["data_wait_s"], 3),
            "checkpoint_s": round(t["checkpoint_s"], 3),
            "startup_s": round(t["startup_s"], 3),
            "restart_lost_s": round(t["lost_s"], 3),
            "restarts": int(t["restarts"]),
            "lost_steps": int(t["lost_steps"]),
            "steps_timed": int(t["steps"]),
        }

    # ---------------------------------------------------------------- Stateful
    def state_dict(self) -> dict[str, Any]:
        return {"totals": dict(self.totals), "wall_s": self.wall_s(), "saved_at": time.time()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.totals = {k: float(state["totals"].get(k, 0.0)) for k in FIELDS}


class Heartbeat:
    """`heartbeat.json` in the run dir: the last finished step, atomically rewritten."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "heartbeat.json"
        self._tmp = self.path.with_suffix(".json.tmp")

    def beat(self, step: int, **extra: Any) -> None:
        self._tmp.write_text(json.dumps({"step": step, "time": time.time(), **extra}))
        os.replace(self._tmp, self.path)

    def last_step(self) -> int | None:
        try:
            return int(json.loads(self.path.read_text())["step"])
        except (FileNotFoundError, ValueError, KeyError):
            return None
