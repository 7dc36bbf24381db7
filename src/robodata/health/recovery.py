"""Recovery cost of an automatic resume: lost steps and restart latency, as run metadata.

Dagster-free: it reads the run tags Dagster's run retries set (`dagster/retry_number`,
`dagster/parent_run_id`, `dagster/root_run_id`) from a plain mapping. The training asset
passes its resumed checkpoint step, the last step the failed attempt reached, and the
failed attempt's end time (from the parent run record), and records `as_metadata()`.

A step retry inside one run (Dagster `RetryPolicy`) has no parent run record: the failed
attempt leaves a note in the run dir (`note_failure`) that the next attempt reads
(`read_failure`) for the same two facts, and clears once it has finished.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robodata.errors import RobodataError

RETRY_NUMBER_TAG = "dagster/retry_number"
PARENT_RUN_ID_TAG = "dagster/parent_run_id"
ROOT_RUN_ID_TAG = "dagster/root_run_id"
FAILURE_NOTE = "last_failure.json"


@dataclass(frozen=True)
class RecoveryCost:
    attempt: int  # 0 for a first run, n for the n-th automatic retry
    parent_run_id: str | None
    root_run_id: str | None
    resumed_from_step: int | None  # checkpoint step the run restarted from (None: from scratch)
    last_step_before_failure: int | None
    lost_steps: int
    restart_latency_s: float | None  # failed attempt's end -> this attempt's start

    @property
    def is_retry(self) -> bool:
        return self.attempt > 0

    def as_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"recovery/attempt": self.attempt, "recovery/lost_steps": self.lost_steps}
        if self.parent_run_id:
            out["recovery/parent_run_id"] = self.parent_run_id
        if self.root_run_id:
            out["recovery/root_run_id"] = self.root_run_id
        if self.resumed_from_step is not None:
            out["recovery/resumed_from_step"] = self.resumed_from_step
        if self.restart_latency_s is not None:
            out["recovery/restart_latency_s"] = round(self.restart_latency_s, 3)
        return out


def recovery_cost(
    tags: Mapping[str, str],
    *,
    start_time: float,
    parent_end_time: float | None = None,
    last_step_before_failure: int | None = None,
    resumed_from_step: int | None = None,
) -> RecoveryCost:
    """Cost of this attempt's recovery. Steps done after the checkpoint and before the
    failure are lost; a first run (no retry tag) costs nothing."""
    try:
        attempt = int(tags.get(RETRY_NUMBER_TAG, "0"))
    except ValueError:
        raise RobodataError(f"run tag {RETRY_NUMBER_TAG}={tags[RETRY_NUMBER_TAG]!r} is not an integer") from None
    if attempt < 0:
        raise RobodataError(f"run tag {RETRY_NUMBER_TAG} must be >= 0, got {attempt}")
    if (
        resumed_from_step is not None
        and last_step_before_failure is not None
        and resumed_from_step > last_step_before_failure
    ):
        raise RobodataError(
            f"resumed from step {resumed_from_step}, after the failed attempt's last step "
            f"{last_step_before_failure}: the checkpoint is not from the failed attempt"
        )
    lost = 0
    if attempt and last_step_before_failure is not None:
        lost = last_step_before_failure - (resumed_from_step or 0)
    latency = None
    if attempt and parent_end_time is not None:
        latency = max(0.0, start_time - parent_end_time)
    return RecoveryCost(
        attempt,
        tags.get(PARENT_RUN_ID_TAG),
        tags.get(ROOT_RUN_ID_TAG),
        resumed_from_step,
        last_step_before_failure,
        lost,
        latency,
    )


@dataclass(frozen=True)
class FailureNote:
    ended_at: float  # when the failed attempt ended (epoch seconds)
    last_step: int | None  # the last step it finished (its heartbeat), None if it never trained
    error: str


def note_failure(run_dir: str | Path, last_step: int | None, error: str, ended_at: float | None = None) -> None:
    """Record, atomically, that an attempt on run_dir failed (read by the retry)."""
    path = Path(run_dir) / FAILURE_NOTE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(
            {"ended_at": time.time() if ended_at is None else ended_at, "last_step": last_step, "error": error[-2000:]}
        )
    )
    os.replace(tmp, path)


def read_failure(run_dir: str | Path) -> FailureNote | None:
    path = Path(run_dir) / FAILURE_NOTE
    try:
        raw = json.loads(path.read_text())
        step = raw["last_step"]
        return FailureNote(float(raw["ended_at"]), None if step is None else int(step), str(raw.get("error", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RobodataError(f"unreadable failure note {path}: {exc}") from exc


def clear_failure(run_dir: str | Path) -> None:
    (Path(run_dir) / FAILURE_NOTE).unlink(missing_ok=True)
