"""A fake NVML with pynvml's call names and return shapes, for tests, demos and benches.

Values are shaped as the real library returns them: counters are ints from
`nvmlDeviceGetTotalEccErrors(handle, errorType, counterType)`, ECC mode is
`[current, pending]`, remapped rows are `(corr, unc, pending, failure)`, retired pages
are a list of page addresses, event waits return an object with `device`, `eventType`
and `eventData` (the XID) or raise `NVMLError_Timeout`. Unsupported queries raise
`NVMLError_NotSupported`, exactly as pre-Ampere / post-Ampere GPUs do for row remapping /
page retirement respectively.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from robodata.config import from_dict, require
from robodata.errors import ConfigError


@dataclass
class FakeGpu:
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    name: str = "NVIDIA H100 80GB HBM3"
    ecc_mode: list[int] | None = field(default_factory=lambda: [1, 1])  # [current, pending]; None: no ECC memory
    volatile_corrected: int = 0
    volatile_uncorrected: int = 0
    aggregate_corrected: int = 0
    aggregate_uncorrected: int = 0
    retired_sbe_pages: list[int] = field(default_factory=list)
    retired_dbe_pages: list[int] = field(default_factory=list)
    retired_pending: int | None = None  # None: NotSupported (Ampere and later use row remapping)
    remapped_rows: list[int] | None = field(default_factory=lambda: [0, 0, 0, 0])  # None: NotSupported
    xids: list[int] = field(default_factory=list)  # XID events delivered after registration
    lost: bool = False  # every call raises NVMLError_GpuIsLost (GPU fell off the bus)

    def __post_init__(self) -> None:
        require(self.ecc_mode is None or len(self.ecc_mode) == 2, "FakeGpu.ecc_mode is [current, pending]")
        require(self.remapped_rows is None or len(self.remapped_rows) == 4, "FakeGpu.remapped_rows has 4 values")
        for name in ("volatile_corrected", "volatile_uncorrected", "aggregate_corrected", "aggregate_uncorrected"):
            require(getattr(self, name) >= 0, f"FakeGpu.{name} must be >= 0")
        # NVML's aggregate counter includes the volatile one.
        require(self.aggregate_uncorrected >= self.volatile_uncorrected, "aggregate_uncorrected < volatile")
        require(self.aggregate_corrected >= self.volatile_corrected, "aggregate_corrected < volatile")


@dataclass(frozen=True)
class FakeHandle:
    index: int


@dataclass
class FakeEventData:
    device: FakeHandle
    eventType: int
    eventData: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


class FakeEventSet:
    def __init__(self) -> None:
        self.handles: list[FakeHandle] = []
        self.freed = False


class FakeNvml:
    """Drop-in for the `pynvml` module over a list of FakeGpu."""

    def __init__(self, gpus: list[FakeGpu], driver_version: str = "550.127.05", init_error: int | None = None):
        self.gpus = list(gpus)
        self.driver_version = driver_version
        self.init_error = init_error
        self.initialized = False
        self._queued: dict[int, list[int]] = {}

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> FakeNvml:
        gpus = [from_dict(FakeGpu, g, path=f"fake_nvml.gpus[{i}]") for i, g in enumerate(spec.get("gpus", []))]
        unknown = set(spec) - {"gpus", "driver_version", "init_error"}
        require(not unknown, f"fake_nvml: unknown key(s) {sorted(unknown)}")
        return cls(gpus, spec.get("driver_version", "550.127.05"), spec.get("init_error"))

    @classmethod
    def from_file(cls, path: str | Path) -> FakeNvml:
        import json

        return cls.from_spec(json.loads(Path(path).read_text()))

    # -- library lifecycle -------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._need_init()
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._need_init()
        return self.driver_version

    # -- devices -----------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._need_init()
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetEccMode(self, handle: FakeHandle) -> list[int]:
        gpu = self._gpu(handle)
        if gpu.ecc_mode is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return list(gpu.ecc_mode)

    def nvmlDeviceGetTotalEccErrors(self, handle: FakeHandle, errorType: int, counterType: int) -> int:
        gpu = self._gpu(handle)
        if gpu.ecc_mode is None or gpu.ecc_mode[0] != pynvml.NVML_FEATURE_ENABLED:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        table = {
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC): gpu.volatile_corrected,
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC): gpu.volatile_uncorrected,
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC): gpu.aggregate_corrected,
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): gpu.aggregate_uncorrected,
        }
        if (errorType, counterType) not in table:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(table[(errorType, counterType)])

    def nvmlDeviceGetRetiredPages(self, handle: FakeHandle, sourceFilter: int) -> list[int]:
        gpu = self._gpu(handle)
        if gpu.retired_pending is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if sourceFilter == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
            return list(gpu.retired_sbe_pages)
        if sourceFilter == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
            return list(gpu.retired_dbe_pages)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeHandle) -> int:
        gpu = self._gpu(handle)
        if gpu.retired_pending is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(gpu.retired_pending)

    def nvmlDeviceGetRemappedRows(self, handle: FakeHandle) -> tuple[int, int, int, int]:
        gpu = self._gpu(handle)
        if gpu.remapped_rows is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        corr, unc, pending, failure = (int(v) for v in gpu.remapped_rows)
        return (corr, unc, pending, failure)

    # -- events ------------------------------------------------------------------------
    def nvmlDeviceGetSupportedEventTypes(self, handle: FakeHandle) -> int:
        self._gpu(handle)
        return pynvml.nvmlEventTypeAll

    def nvmlEventSetCreate(self) -> FakeEventSet:
        self._need_init()
        return FakeEventSet()

    def nvmlDeviceRegisterEvents(self, handle: FakeHandle, eventTypes: int, eventSet: FakeEventSet) -> None:
        gpu = self._gpu(handle)
        eventSet.handles.append(handle)
        if eventTypes & pynvml.nvmlEventTypeXidCriticalError:
            self._queued[handle.index] = list(gpu.xids)

    def nvmlEventSetWait(self, eventSet: FakeEventSet, timeoutms: int) -> FakeEventData:
        self._need_init()
        if eventSet.freed:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for handle in eventSet.handles:
            queue = self._queued.get(handle.index)
            if queue:
                return FakeEventData(handle, pynvml.nvmlEventTypeXidCriticalError, queue.pop(0))
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, eventSet: FakeEventSet) -> None:
        eventSet.freed = True

    # -- internals ---------------------------------------------------------------------
    def _need_init(self) -> None:
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: FakeHandle) -> FakeGpu:
        self._need_init()
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu


def backend(spec: str | Path | None) -> FakeNvml:
    """The `fake` NVML backend (entry points robodata.nvml_backends, this package's registration):
    GPUs and errors from a JSON spec (`robodata health check --nvml-backend fake --nvml-spec F`)."""
    if spec is None:
        raise ConfigError("the fake NVML backend needs --nvml-spec FILE (a JSON spec of GPUs)")
    return FakeNvml.from_file(spec)
