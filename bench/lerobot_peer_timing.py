"""The timed loop of bench.lerobot_peer, one for both sides: the robodata side imports it, the
LeRobot side (peer venv, no robodata) loads it by file path. Standard library only.

The first batch of each worker (worker start, first-touch memory) is warm-up and not timed;
first_batch_s is the time to the first batch from `t0` (dataset construction included).

CPU per sample, over the timed batches. Without workers: this process's CPU (every thread) from
the end of the warm-up to the last batch. With workers, a window would miss the batches built
before it ends (prefetched) and count ones built for later, so each side's worker measures the CPU
of every batch it builds (process CPU: its decode threads included; `CPU_KEY` in the batch:
LeRobot's per-sample reads plus its collate, our `batch()`), and the timed batches' figures are
added to this process's CPU over the window (receiving the batches).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CPU_KEY = "_cpu_s"  # a batch's CPU seconds, measured by the worker that built it


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                continue
    except OSError:
        pass
    return out


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its live children, as of now."""
    total = time.process_time()
    for kid in _children(os.getpid()):
        try:
            with open(f"/proc/{kid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)
    return total


def timed_batches(batches: Iterable[Mapping[str, Any]], count_key: str, workers: int, t0: float) -> dict[str, Any]:
    """samples/s over `batches` after the warm-up, samples timed, CPU seconds per sample timed,
    first_batch_s, and the dtype and shape of each tensor of the first batch (values with both a
    dtype and a shape)."""
    warm = max(1, workers)
    n, seen, t_warm, first_s, shapes = 0, 0, None, None, {}
    c_warm = c_last = built = 0.0
    for b in batches:
        seen += 1
        if first_s is None:
            first_s = time.perf_counter() - t0
            shapes = {
                k: [str(v.dtype), list(v.shape)] for k, v in b.items() if hasattr(v, "dtype") and hasattr(v, "shape")
            }
        if seen <= warm:
            t_warm = time.perf_counter()
            c_warm = c_last = time.process_time() if workers else cpu_s()
            continue
        n += len(b[count_key])
        if workers:
            built += float(b[CPU_KEY].sum())
        del b
        c_last = time.process_time() if workers else cpu_s()
    wall = time.perf_counter() - (t_warm or t0)
    return {
        "samples_per_s": n / wall if n else 0.0,
        "samples": n,
        "cpu_ms_per_sample": (c_last - c_warm + built) * 1e3 / n if n else 0.0,
        "first_batch_s": first_s,
        "shapes": shapes,
    }
