"""What repair remembers between passes (a Dagster sensor keeps it in its cursor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from robodata.cluster.snapshot import fmt_time, parse_time


@dataclass
class RepairState:
    """first_seen: when a condition (cordon, orphan annotation) was first observed, for
    conditions the API carries no timestamp for. reported: when an alert / dry-run
    action was last written, so a sensor ticking every minute does not flood the audit."""

    first_seen: dict[str, str] = field(default_factory=dict)
    reported: dict[str, str] = field(default_factory=dict)

    def seen_since(self, key: str, now: datetime) -> datetime:
        return parse_time(self.first_seen.setdefault(key, fmt_time(now))) or now

    def forget_gone(self, prefix: str, live_keys: set[str]) -> None:
        """Drop first-seen times under `prefix` whose condition is no longer observed."""
        self.first_seen = {k: v for k, v in self.first_seen.items() if not k.startswith(prefix) or k in live_keys}

    def should_report(self, key: str, now: datetime, every_s: float) -> bool:
        last = parse_time(self.reported.get(key))
        return last is None or now - last >= timedelta(seconds=every_s)

    def mark_reported(self, key: str, now: datetime) -> None:
        self.reported[key] = fmt_time(now)

    def prune_reported(self, now: datetime, older_than_s: float) -> None:
        cutoff = now - timedelta(seconds=older_than_s)
        self.reported = {k: v for k, v in self.reported.items() if (parse_time(v) or now) >= cutoff}

    def state_dict(self) -> dict[str, Any]:
        return {"first_seen": dict(self.first_seen), "reported": dict(self.reported)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.first_seen = dict(state_dict.get("first_seen", {}))
        self.reported = dict(state_dict.get("reported", {}))
