"""The timed loop of bench.lerobot_peer, one for both sides: the robodata side imports it, the
LeRobot side (peer venv, no robodata) loads it by file path. Standard library only.

The first batch of each worker (worker start, first-touch memory) is warm-up and not timed;
first_batch_s is the time to the first batch from `t0` (dataset construction included).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any


def timed_batches(batches: Iterable[Mapping[str, Any]], count_key: str, workers: int, t0: float) -> dict[str, Any]:
    """samples/s over `batches` after the warm-up, samples timed, first_batch_s, and the dtype and
    shape of each tensor of the first batch (values with both a dtype and a shape)."""
    warm = max(1, workers)
    n, seen, t_warm, first_s, shapes = 0, 0, None, None, {}
    for b in batches:
        seen += 1
        if first_s is None:
            first_s = time.perf_counter() - t0
            shapes = {
                k: [str(v.dtype), list(v.shape)] for k, v in b.items() if hasattr(v, "dtype") and hasattr(v, "shape")
            }
        if seen <= warm:
            t_warm = time.perf_counter()
            continue
        n += len(b[count_key])
        del b
    wall = time.perf_counter() - (t_warm or t0)
    return {"samples_per_s": n / wall if n else 0.0, "samples": n, "first_batch_s": first_s, "shapes": shapes}
