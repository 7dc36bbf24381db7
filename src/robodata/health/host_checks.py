"""CPU-only checks every node runs: memory, disk free, /dev/shm, wall clock."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import time
from pathlib import Path

from robodata.health.config import HostPolicy
from robodata.health.findings import Finding, Level

GIB = 1024**3
STA_UNSYNC = 0x0040
TIME_ERROR = 5


def check_host(policy: HostPolicy, meminfo: str | Path = "/proc/meminfo") -> list[Finding]:
    out = [_memory(policy, Path(meminfo))]
    out += [_free_space("host.disk", p, policy.min_disk_free_gib) for p in policy.disk_paths]
    out.append(_free_space("host.shm", policy.shm_path, policy.min_shm_free_gib))
    out += _clock(policy)
    return out


def _memory(policy: HostPolicy, meminfo: Path) -> Finding:
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError) as exc:
        return Finding("host.memory", Level.BLOCKING, f"cannot read MemAvailable from {meminfo}: {exc}")
    gib = available / GIB
    data = {"available_gib": round(gib, 2)}
    if gib < policy.min_mem_available_gib:
        return Finding(
            "host.memory", Level.BLOCKING, f"{gib:.1f} GiB available < {policy.min_mem_available_gib} GiB", data=data
        )
    return Finding("host.memory", Level.INFO, f"{gib:.1f} GiB available", data=data)


def _free_space(check: str, path: str, min_gib: float) -> Finding:
    try:
        usage = shutil.disk_usage(path)
    except OSError as exc:
        return Finding(check, Level.BLOCKING, f"{path}: {exc}")
    gib = usage.free / GIB
    data = {"path": path, "free_gib": round(gib, 2)}
    if gib < min_gib:
        return Finding(check, Level.BLOCKING, f"{path}: {gib:.2f} GiB free < {min_gib} GiB", data=data)
    if not os.access(path, os.W_OK):
        return Finding(check, Level.BLOCKING, f"{path}: not writable", data=data)
    return Finding(check, Level.INFO, f"{path}: {gib:.1f} GiB free", data=data)


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class _Timex(ctypes.Structure):
    """struct timex from <sys/timex.h> (Linux); ctypes applies the ABI's padding."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_pad", ctypes.c_int * 11),
    ]


def read_adjtimex() -> tuple[int, int, int] | None:
    """(clock state, status bits, maxerror in microseconds), read-only; None where unavailable."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        tx = _Timex()  # modes=0: query only, no privilege needed
        state = libc.adjtimex(ctypes.byref(tx))
    except (OSError, AttributeError):
        return None
    if state < 0:
        return None
    return state, tx.status, tx.maxerror


def _clock(policy: HostPolicy, now: float | None = None) -> list[Finding]:
    now = time.time() if now is None else now
    if now < policy.earliest_plausible_epoch:
        return [Finding("host.clock", Level.FAULT, f"wall clock reads {time.ctime(now)}: not set")]
    sync = read_adjtimex()
    if sync is None:
        return [Finding("host.clock", Level.INFO, "adjtimex unavailable; sync not checked")]
    state, status, maxerror_us = sync
    data = {"state": state, "status": status, "maxerror_s": maxerror_us / 1e6}
    unsynced = state == TIME_ERROR or bool(status & STA_UNSYNC)
    if unsynced:
        level = Level.BLOCKING if policy.require_clock_synced else Level.INFO
        return [Finding("host.clock", level, "kernel reports the clock as unsynchronized", data=data)]
    if maxerror_us / 1e6 > policy.max_clock_error_s:
        return [
            Finding(
                "host.clock",
                Level.BLOCKING,
                f"clock error bound {maxerror_us / 1e6:.3f}s > {policy.max_clock_error_s}s",
                data=data,
            )
        ]
    return [Finding("host.clock", Level.INFO, f"synchronized, error bound {maxerror_us / 1e6:.3f}s", data=data)]
