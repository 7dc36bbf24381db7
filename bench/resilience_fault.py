"""A fault bench.resilience injects, and what came of it (shared with bench.resilience_training)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class FaultResult:
    survived: bool
    data_lost: int = 0
    detail: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    name: str
    owner: str  # "health" | "cluster" | "training" | ...
    run: Callable[[Path, bool], FaultResult]  # (scratch dir, quick) -> result
