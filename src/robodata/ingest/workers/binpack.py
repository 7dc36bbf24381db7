"""Bin-packing of episodes into work bins of near-equal bytes.

`balance` (makespan): longest-processing-time-first into the lightest bin, then a local
search that moves / swaps items between the heaviest and lightest bins while that lowers
the heaviest one (LPT is within 4/3 of optimal; the moves usually close most of the rest).
`first_fit_decreasing` (capacity): bins of at most `capacity` bytes, for cutting batches.
`lpt_order` + `list_schedule`: the conversion stage does not fix bins up front; workers pull
jobs largest-first as they finish (robodata.ingest.workers.dispatch), which `list_schedule` replays.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from robodata.config import require

# Conversion work of an episode in bytes: the decoded video bytes the encoder must eat (frames x
# H x W x 3, known from alignment before any decode) plus a fixed cost per episode (opening
# readers, encoders, the container) in the same unit. Compressed input bytes are the fallback:
# JPEG / H.264 sizes vary with scene content, the encoder's work mostly does not.
PER_EPISODE_OVERHEAD_BYTES = 1_000_000  # measured: ~14 ms fixed vs ~15 ns per decoded byte (x264 veryfast)


def work_estimate(decoded_bytes: float, size_bytes: float = 0.0) -> float:
    return float(decoded_bytes or size_bytes * 10) + PER_EPISODE_OVERHEAD_BYTES


def balance(sizes: Sequence[float], n_bins: int, improve_rounds: int = 200) -> list[list[int]]:
    """Indices of `sizes` split into n_bins bins with near-equal sums (empty bins if few items)."""
    require(n_bins >= 1, f"n_bins must be >= 1, got {n_bins}")
    require(all(s >= 0 for s in sizes), "sizes must be >= 0")
    bins: list[list[int]] = [[] for _ in range(n_bins)]
    loads = [0.0] * n_bins
    heap = [(0.0, b) for b in range(n_bins)]
    for i in sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)):
        load, b = heapq.heappop(heap)
        bins[b].append(i)
        loads[b] = load + sizes[i]
        heapq.heappush(heap, (loads[b], b))
    for _ in range(improve_rounds):
        hi = max(range(n_bins), key=loads.__getitem__)
        lo = min(range(n_bins), key=loads.__getitem__)
        gap = loads[hi] - loads[lo]
        if gap <= 0:
            break
        best: tuple[float, int, int | None] | None = None  # (new max of the two bins, i_from_hi, j_from_lo or None)
        for i in bins[hi]:
            if 0 < sizes[i] < gap:  # move i from hi to lo
                cand = max(loads[hi] - sizes[i], loads[lo] + sizes[i])
                if best is None or cand < best[0]:
                    best = (cand, i, None)
            for j in bins[lo]:
                d = sizes[i] - sizes[j]
                if 0 < d < gap:
                    cand = max(loads[hi] - d, loads[lo] + d)
                    if best is None or cand < best[0]:
                        best = (cand, i, j)
        if best is None or best[0] >= loads[hi]:
            break
        _, move, swap = best
        bins[hi].remove(move)
        bins[lo].append(move)
        loads[hi] -= sizes[move]
        loads[lo] += sizes[move]
        if swap is not None:
            bins[lo].remove(swap)
            bins[hi].append(swap)
            loads[lo] -= sizes[swap]
            loads[hi] += sizes[swap]
    return bins


def lpt_order(sizes: Sequence[float], keys: Sequence[str] | None = None) -> list[int]:
    """Indices by decreasing size (ties by key, then index): the order a pull-based worker
    pool hands jobs out (longest processing time first)."""
    return sorted(range(len(sizes)), key=lambda k: (-sizes[k], keys[k] if keys is not None else "", k))


def list_schedule(durations: Sequence[float], workers: int) -> list[list[int]]:
    """Which worker runs each job when `workers` pull jobs in the given order as they finish
    (the dispatcher's behaviour, replayed on known durations)."""
    require(workers >= 1, f"workers must be >= 1, got {workers}")
    heap = [(0.0, w) for w in range(workers)]
    bins: list[list[int]] = [[] for _ in range(workers)]
    for i, d in enumerate(durations):
        free, w = heapq.heappop(heap)
        bins[w].append(i)
        heapq.heappush(heap, (free + float(d), w))
    return bins


def first_fit_decreasing(sizes: Sequence[float], capacity: float) -> list[list[int]]:
    """Bins holding at most `capacity` each (an item larger than capacity gets a bin of its own)."""
    require(capacity > 0, "capacity must be > 0")
    bins: list[list[int]] = []
    loads: list[float] = []
    for i in sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)):
        for b, load in enumerate(loads):
            if load + sizes[i] <= capacity:
                bins[b].append(i)
                loads[b] += sizes[i]
                break
        else:
            bins.append([i])
            loads.append(float(sizes[i]))
    return bins


def makespan(sizes: Sequence[float], bins: list[list[int]]) -> float:
    return max((sum(sizes[i] for i in b) for b in bins), default=0.0)
