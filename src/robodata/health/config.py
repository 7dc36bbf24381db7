"""Typed, validated thresholds for the preflight (see docs/resilience.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robodata.config import require


@dataclass(frozen=True)
class GpuPolicy:
    expected_gpus: int = 0  # 0: whatever NVML reports (a CPU-only node is fine)
    max_volatile_uncorrected: int = 0  # since boot/driver reload; > this -> FAULT
    max_volatile_corrected: int = 10_000  # sustained corrected errors -> FAULT
    warn_volatile_corrected: int = 100  # -> DEGRADED (healthy false, still assignable)
    require_ecc_enabled: bool = True
    xid_listen_ms: int = 200  # how long the preflight drains the XID event set
    fatal_xids: tuple[int, ...] = (48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 95, 109, 119, 120, 140)
    benign_xids: tuple[int, ...] = (13, 31, 43, 45, 94)  # application-caused; recorded only

    def __post_init__(self) -> None:
        require(self.expected_gpus >= 0, "gpu.expected_gpus must be >= 0")
        require(self.max_volatile_uncorrected >= 0, "gpu.max_volatile_uncorrected must be >= 0")
        require(
            0 <= self.warn_volatile_corrected <= self.max_volatile_corrected,
            "gpu: need 0 <= warn_volatile_corrected <= max_volatile_corrected",
        )
        require(0 <= self.xid_listen_ms <= 60_000, "gpu.xid_listen_ms must be in [0, 60000]")
        require(not set(self.fatal_xids) & set(self.benign_xids), "gpu: an XID cannot be both fatal and benign")


@dataclass(frozen=True)
class HostPolicy:
    min_mem_available_gib: float = 2.0
    disk_paths: tuple[str, ...] = ("/tmp",)
    min_disk_free_gib: float = 5.0
    shm_path: str = "/dev/shm"
    min_shm_free_gib: float = 1.0
    max_clock_error_s: float = 0.5  # kernel's estimate of wall-clock error (adjtimex maxerror)
    require_clock_synced: bool = False  # containers often have no NTP view; off by default
    earliest_plausible_epoch: float = 1_704_067_200.0  # 2024-01-01: a wall clock before this is wrong

    def __post_init__(self) -> None:
        for name in ("min_mem_available_gib", "min_disk_free_gib", "min_shm_free_gib", "max_clock_error_s"):
            require(getattr(self, name) >= 0, f"host.{name} must be >= 0")
        require(bool(self.shm_path), "host.shm_path must not be empty")


@dataclass(frozen=True)
class ProbePolicy:
    matmul: bool = True
    matmul_size: int = 256
    matmul_rtol: float = 1e-3
    allreduce: bool = True
    allreduce_world_size: int = 2
    allreduce_timeout_s: float = 60.0
    allreduce_ifname: str = "lo"  # GLOO_SOCKET_IFNAME for the local ranks

    def __post_init__(self) -> None:
        require(16 <= self.matmul_size <= 8192, "probe.matmul_size must be in [16, 8192]")
        require(self.matmul_rtol > 0, "probe.matmul_rtol must be > 0")
        require(2 <= self.allreduce_world_size <= 16, "probe.allreduce_world_size must be in [2, 16]")
        require(self.allreduce_timeout_s > 0, "probe.allreduce_timeout_s must be > 0")


@dataclass(frozen=True)
class HealthConfig:
    gpu: GpuPolicy = field(default_factory=GpuPolicy)
    host: HostPolicy = field(default_factory=HostPolicy)
    probe: ProbePolicy = field(default_factory=ProbePolicy)
