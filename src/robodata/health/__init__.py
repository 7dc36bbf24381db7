"""Node preflight: per node, *healthy* and *assignable* decided separately.

    from robodata.health import run_preflight, split_assignable
    result = run_preflight(HealthConfig())          # real NVML (pynvml), host checks, probes
    ok, excluded = split_assignable(table_uri, candidate_nodes, max_age)

See docs/resilience.md.
"""

from robodata.health.config import GpuPolicy, HealthConfig, HostPolicy, ProbePolicy
from robodata.health.findings import Finding, Level, NodeVerdict
from robodata.health.preflight import PreflightResult, run_preflight
from robodata.health.store import latest_by_node, split_assignable, write_results

__all__ = [
    "Finding",
    "GpuPolicy",
    "HealthConfig",
    "HostPolicy",
    "Level",
    "NodeVerdict",
    "PreflightResult",
    "ProbePolicy",
    "latest_by_node",
    "run_preflight",
    "split_assignable",
    "write_results",
]
