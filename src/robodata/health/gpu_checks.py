"""GPU checks over NVML. ECC is judged on the volatile counters only.

Volatile counters reset at boot / driver reload; aggregate (lifetime) counters live in
the GPU's infoROM and on many boards can never be cleared. A GPU that once had an
uncorrected error and has since been reset is healthy; judging the aggregate counter
would bar it forever. So aggregate counts are recorded as INFO and never exclude a node.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pynvml

from robodata.health.config import GpuPolicy
from robodata.health.findings import Finding, Level
from robodata.health.nvml_backend import NO_DRIVER_CODES, NvmlBackend, is_not_supported, is_timeout

UNC = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
COR = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
XID_EVENT = pynvml.nvmlEventTypeXidCriticalError


def check_gpus(nvml: NvmlBackend, policy: GpuPolicy) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Run every NVML check; returns findings and one facts dict per GPU."""
    try:
        nvml.nvmlInit()
    except pynvml.NVMLError as exc:
        if exc.value in NO_DRIVER_CODES and policy.expected_gpus == 0:
            return [Finding("gpu.nvml", Level.INFO, f"no NVML ({exc}); CPU-only node")], []
        return [Finding("gpu.nvml", Level.FAULT, f"NVML init failed: {exc}")], []
    findings: list[Finding] = []
    facts: list[dict[str, Any]] = []
    try:
        count = nvml.nvmlDeviceGetCount()
        if policy.expected_gpus and count != policy.expected_gpus:
            findings.append(
                Finding("gpu.count", Level.FAULT, f"NVML sees {count} GPUs, expected {policy.expected_gpus}")
            )
        handles: dict[int, Any] = {}
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                gpu_facts = {
                    "index": index,
                    "uuid": nvml.nvmlDeviceGetUUID(handle),
                    "name": nvml.nvmlDeviceGetName(handle),
                }
                findings += _ecc(nvml, handle, index, policy, gpu_facts)
                findings += _retired_pages(nvml, handle, index, gpu_facts)
                findings += _remapped_rows(nvml, handle, index, gpu_facts)
                handles[index] = handle
                facts.append(gpu_facts)
            except pynvml.NVMLError as exc:
                findings.append(Finding("gpu.query", Level.FAULT, f"NVML query failed: {exc}", gpu=index))
        findings += _xid_events(nvml, handles, policy)
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            nvml.nvmlShutdown()
    return findings, facts


def _ecc(nvml: NvmlBackend, handle: Any, index: int, policy: GpuPolicy, facts: dict[str, Any]) -> list[Finding]:
    try:
        current, pending = nvml.nvmlDeviceGetEccMode(handle)
    except pynvml.NVMLError as exc:
        if not is_not_supported(exc):
            raise
        current = pending = pynvml.NVML_FEATURE_DISABLED  # boards without ECC memory
    facts["ecc_mode"] = [current, pending]
    out: list[Finding] = []
    if current != pynvml.NVML_FEATURE_ENABLED:
        level = Level.BLOCKING if policy.require_ecc_enabled else Level.INFO
        return [Finding("gpu.ecc.mode", level, "ECC is disabled; memory errors cannot be detected", gpu=index)]
    if pending != current:
        out.append(Finding("gpu.ecc.mode", Level.INFO, "ECC mode change pending until reboot", gpu=index))
    vol_unc = _counter(nvml, handle, UNC, pynvml.NVML_VOLATILE_ECC)
    vol_cor = _counter(nvml, handle, COR, pynvml.NVML_VOLATILE_ECC)
    agg_unc = _counter(nvml, handle, UNC, pynvml.NVML_AGGREGATE_ECC)
    agg_cor = _counter(nvml, handle, COR, pynvml.NVML_AGGREGATE_ECC)
    facts.update(
        ecc_volatile_uncorrected=vol_unc,
        ecc_volatile_corrected=vol_cor,
        ecc_aggregate_uncorrected=agg_unc,
        ecc_aggregate_corrected=agg_cor,
    )
    if vol_unc is None or vol_cor is None:
        out.append(Finding("gpu.ecc.volatile", Level.INFO, "volatile ECC counters not available; not judged", index))
    data = {"volatile_uncorrected": vol_unc, "volatile_corrected": vol_cor}
    if vol_unc is not None and vol_unc > policy.max_volatile_uncorrected:
        out.append(
            Finding("gpu.ecc.volatile", Level.FAULT, f"{vol_unc} uncorrected ECC errors since boot", index, data)
        )
    if vol_cor is not None and vol_cor > policy.max_volatile_corrected:
        out.append(Finding("gpu.ecc.volatile", Level.FAULT, f"{vol_cor} corrected ECC errors since boot", index, data))
    elif vol_cor is not None and vol_cor > policy.warn_volatile_corrected:
        out.append(
            Finding("gpu.ecc.volatile", Level.DEGRADED, f"{vol_cor} corrected ECC errors since boot", index, data)
        )
    if agg_unc or agg_cor:
        msg = f"lifetime ECC counts corrected={agg_cor} uncorrected={agg_unc} (history only, not judged)"
        out.append(
            Finding(
                "gpu.ecc.aggregate",
                Level.INFO,
                msg,
                index,
                {"aggregate_uncorrected": agg_unc, "aggregate_corrected": agg_cor},
            )
        )
    return out


def _counter(nvml: NvmlBackend, handle: Any, error_type: int, counter_type: int) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetTotalEccErrors(handle, error_type, counter_type))
    except pynvml.NVMLError as exc:
        if is_not_supported(exc):
            return None
        raise


def _retired_pages(nvml: NvmlBackend, handle: Any, index: int, facts: dict[str, Any]) -> list[Finding]:
    """Page retirement (pre-Ampere). NotSupported on GPUs that use row remapping instead."""
    try:
        pending = nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)
        sbe = nvml.nvmlDeviceGetRetiredPages(handle, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        dbe = nvml.nvmlDeviceGetRetiredPages(handle, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    except pynvml.NVMLError as exc:
        if is_not_supported(exc):
            return []
        raise
    facts.update(retired_pages_pending=bool(pending), retired_pages_sbe=len(sbe), retired_pages_dbe=len(dbe))
    if pending:
        return [
            Finding(
                "gpu.retired_pages",
                Level.FAULT,
                "page retirement pending: the GPU needs a reset",
                index,
                {"sbe": len(sbe), "dbe": len(dbe)},
            )
        ]
    if sbe or dbe:
        return [Finding("gpu.retired_pages", Level.INFO, f"{len(sbe) + len(dbe)} pages retired (in effect)", index)]
    return []


def _remapped_rows(nvml: NvmlBackend, handle: Any, index: int, facts: dict[str, Any]) -> list[Finding]:
    """Row remapping (Ampere and later). NotSupported on older GPUs."""
    try:
        corr, unc, pending, failure = nvml.nvmlDeviceGetRemappedRows(handle)
    except pynvml.NVMLError as exc:
        if is_not_supported(exc):
            return []
        raise
    facts.update(
        remapped_rows_correctable=corr,
        remapped_rows_uncorrectable=unc,
        remap_pending=bool(pending),
        remap_failure=bool(failure),
    )
    data = {"correctable": corr, "uncorrectable": unc}
    if failure:
        return [Finding("gpu.row_remap", Level.FAULT, "row remapping failed: the GPU needs service", index, data)]
    if pending:
        return [Finding("gpu.row_remap", Level.FAULT, "row remapping pending: the GPU needs a reset", index, data)]
    if corr or unc:
        return [Finding("gpu.row_remap", Level.INFO, f"{corr + unc} rows remapped (in effect)", index, data)]
    return []


def _xid_events(nvml: NvmlBackend, handles: dict[int, Any], policy: GpuPolicy) -> list[Finding]:
    """Drain XID critical-error events for `xid_listen_ms` (NVML delivers events after registration)."""
    if not handles or policy.xid_listen_ms == 0:
        return []
    out: list[Finding] = []
    event_set = nvml.nvmlEventSetCreate()
    try:
        by_uuid: dict[str, int] = {}
        for index, handle in handles.items():
            try:
                if nvml.nvmlDeviceGetSupportedEventTypes(handle) & XID_EVENT:
                    nvml.nvmlDeviceRegisterEvents(handle, XID_EVENT, event_set)
                    by_uuid[nvml.nvmlDeviceGetUUID(handle)] = index
                    continue
            except pynvml.NVMLError as exc:
                if not is_not_supported(exc):
                    raise
            out.append(Finding("gpu.xid", Level.INFO, "XID events not supported; not watched", index))
        if not by_uuid:
            return out
        deadline = time.monotonic() + policy.xid_listen_ms / 1000.0
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                event = nvml.nvmlEventSetWait(event_set, max(1, int(remaining * 1000)))
            except pynvml.NVMLError as exc:
                if is_timeout(exc):
                    break
                raise
            if not event.eventType & XID_EVENT:
                continue
            gpu = by_uuid.get(nvml.nvmlDeviceGetUUID(event.device))
            out.append(_classify_xid(int(event.eventData), gpu, policy))
    finally:
        nvml.nvmlEventSetFree(event_set)
    return out


def _classify_xid(xid: int, index: int | None, policy: GpuPolicy) -> Finding:
    if xid in policy.fatal_xids:
        return Finding("gpu.xid", Level.FAULT, f"XID {xid} (hardware/driver fault)", index, {"xid": xid})
    if xid in policy.benign_xids:
        return Finding("gpu.xid", Level.INFO, f"XID {xid} (application-caused)", index, {"xid": xid})
    return Finding("gpu.xid", Level.DEGRADED, f"XID {xid} (unclassified)", index, {"xid": xid})
