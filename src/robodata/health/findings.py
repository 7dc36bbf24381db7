"""Findings and the per-node verdict: *healthy* and *assignable* are separate facts.

Each check emits Findings with a Level:

- INFO: recorded only (e.g. a lifetime ECC count with no volatile errors).
- DEGRADED: the machine is not fully healthy, but work may still be placed on it
  (e.g. an application-caused XID, corrected-error rate close to the limit).
- BLOCKING: the machine is fine, but must not get work now (disk or /dev/shm full,
  cordoned, probe could not run).
- FAULT: broken; neither healthy nor assignable (volatile uncorrected ECC, pending page
  retirement, fatal XID, wrong matmul result).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Level(enum.StrEnum):
    INFO = "info"
    DEGRADED = "degraded"
    BLOCKING = "blocking"
    FAULT = "fault"

    @property
    def unhealthy(self) -> bool:
        return self in (Level.DEGRADED, Level.FAULT)

    @property
    def unassignable(self) -> bool:
        return self in (Level.BLOCKING, Level.FAULT)


@dataclass(frozen=True)
class Finding:
    check: str  # e.g. "gpu.ecc.volatile"
    level: Level
    message: str
    gpu: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def reason(self) -> str:
        where = f"gpu{self.gpu} " if self.gpu is not None else ""
        return f"{self.check}: {where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["level"] = self.level.value
        return out


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    findings: tuple[Finding, ...]

    @property
    def healthy(self) -> bool:
        return not any(f.level.unhealthy for f in self.findings)

    @property
    def assignable(self) -> bool:
        return not any(f.level.unassignable for f in self.findings)

    @property
    def excluded(self) -> bool:
        return not self.assignable

    def reasons(self, *levels: Level) -> list[str]:
        """Reasons at the given levels (default: everything that is not INFO)."""
        wanted = set(levels) or {Level.DEGRADED, Level.BLOCKING, Level.FAULT}
        return [f.reason() for f in self.findings if f.level in wanted]

    def exclusion_reasons(self) -> list[str]:
        return self.reasons(Level.BLOCKING, Level.FAULT)
