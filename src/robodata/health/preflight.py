"""The preflight: run every check on this node and decide *healthy* and *assignable*.

Run as the first step of a training run on every node; nodes whose verdict is not
assignable are excluded before the job is placed, with the reasons recorded.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from robodata.health.config import HealthConfig
from robodata.health.findings import Finding, Level, NodeVerdict
from robodata.health.gpu_checks import check_gpus
from robodata.health.host_checks import check_host
from robodata.health.nvml_backend import NvmlBackend, real_backend
from robodata.health.probes import allreduce_probe, matmul_probe


@dataclass(frozen=True)
class PreflightResult:
    verdict: NodeVerdict
    gpus: list[dict[str, Any]]
    checked_at: datetime
    seconds: float
    backend: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_row(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "checked_at": self.checked_at,
            "run_id": self.run_id,
            "node": v.node,
            "healthy": v.healthy,
            "assignable": v.assignable,
            "reasons": v.reasons(),
            "exclusion_reasons": v.exclusion_reasons(),
            "gpu_count": len(self.gpus),
            "backend": self.backend,
            "seconds": self.seconds,
            "findings_json": json.dumps([f.to_dict() for f in v.findings], sort_keys=True),
            "gpus_json": json.dumps(self.gpus, sort_keys=True),
        }


def run_preflight(
    config: HealthConfig | None = None,
    *,
    node: str | None = None,
    nvml: NvmlBackend | None = None,
    probes: bool = True,
    meminfo: str = "/proc/meminfo",
) -> PreflightResult:
    """Run GPU, host and (optionally) probe checks; never raises for a failing check."""
    config = config or HealthConfig()
    node = node or socket.gethostname()
    backend = nvml if nvml is not None else real_backend()
    t0 = time.perf_counter()
    findings: list[Finding] = []
    gpus: list[dict[str, Any]] = []
    try:
        gpu_findings, gpus = check_gpus(backend, config.gpu)
        findings += gpu_findings
    except Exception as exc:  # a check that crashes must exclude, not pass, the node
        findings.append(Finding("gpu", Level.FAULT, f"GPU checks crashed: {type(exc).__name__}: {exc}"))
    findings += check_host(config.host, meminfo=meminfo)
    if probes and config.probe.matmul:
        findings += _guard("probe.matmul", lambda: matmul_probe(config.probe))
    if probes and config.probe.allreduce:
        findings += _guard("probe.allreduce", lambda: [allreduce_probe(config.probe)])
    return PreflightResult(
        verdict=NodeVerdict(node, tuple(findings)),
        gpus=gpus,
        checked_at=datetime.now(UTC),
        seconds=round(time.perf_counter() - t0, 3),
        backend=type(backend).__name__ if nvml is not None else "pynvml",
    )


def _guard(check: str, fn: Any) -> list[Finding]:
    try:
        return list(fn())
    except Exception as exc:
        return [Finding(check, Level.BLOCKING, f"probe could not run: {type(exc).__name__}: {exc}")]
