"""The NVML surface the GPU checks use, and the real backend (the `pynvml` module).

The checks call NVML through an object with pynvml's own function names and return
shapes, so the real backend is simply the `pynvml` module and the fake one
(`robodata_testing.fake_nvml.FakeNvml`) mirrors those calls. Errors are always
`pynvml.NVMLError` subclasses, from either backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pynvml

from robodata.errors import ConfigError


class NvmlBackend(Protocol):
    """The pynvml calls the preflight makes (names and shapes exactly as pynvml's)."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]: ...
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int: ...
    def nvmlDeviceGetRetiredPages(self, handle: Any, sourceFilter: int) -> list[int]: ...
    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int: ...
    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]: ...
    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int: ...
    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None: ...
    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any: ...
    def nvmlEventSetFree(self, eventSet: Any) -> None: ...


def real_backend() -> NvmlBackend:
    """The pynvml module itself; `nvmlInit` raises NVMLError where there is no driver."""
    return pynvml


def is_not_supported(exc: BaseException) -> bool:
    return isinstance(exc, pynvml.NVMLError) and exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, pynvml.NVMLError) and exc.value == pynvml.NVML_ERROR_TIMEOUT


NO_DRIVER_CODES = frozenset(
    {pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
)


ENTRY_POINTS = "robodata.nvml_backends"  # name -> callable(spec path or None) -> NvmlBackend


def named_backend(name: str, spec: str | Path | None = None) -> NvmlBackend:
    """The backend registered as `name` in the `robodata.nvml_backends` entry points, built from
    `spec` (robodata_testing registers `fake`: FakeNvml from a JSON spec of GPUs and errors).
    The product code names no backend but pynvml: others are injected by their package."""
    from importlib.metadata import entry_points

    found = {e.name: e for e in entry_points(group=ENTRY_POINTS)}
    if name not in found:
        raise ConfigError(
            f"no NVML backend {name!r} is registered (entry points {ENTRY_POINTS}: {sorted(found) or 'none'}); "
            "omit --nvml-backend for the real one (pynvml)"
        )
    return found[name].load()(spec)
