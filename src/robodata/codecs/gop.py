"""Frame types inside a closed GOP and the frames a window read decodes.

With x264 `b-adapt=0` and no pyramid (the container's encoder settings) a GOP of `gop`
frames with `bframes` B-frames is, in display order, I B..B P B..B P ... and its last frame
is a P (a closed GOP cannot end on a B). Reference frames (I/P) sit at multiples of
bframes+1 and at the end; `decoded_counts` mirrors WindowDecoder.video
(robodata.container.window) frame for frame.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

I, P, B = 0, 1, 2  # noqa: E741 - the codec's own names for frame types


@lru_cache(maxsize=4096)
def frame_types(gop: int, bframes: int) -> tuple[int, ...]:
    """Type (I, P or B) of each display position 0..gop-1."""
    out = []
    for p in range(gop):
        if p == 0:
            out.append(I)
        elif bframes == 0 or p % (bframes + 1) == 0 or p == gop - 1:
            out.append(P)
        else:
            out.append(B)
    return tuple(out)


@lru_cache(maxsize=4096)
def _prefix(gop: int, bframes: int) -> np.ndarray:
    """prefix[t, p] = number of frames of type t among positions < p (one GOP)."""
    types = np.asarray(frame_types(gop, bframes))
    pre = np.zeros((3, gop + 1), dtype=np.int64)
    for t in (I, P, B):
        pre[t, 1:] = np.cumsum(types == t)
    return pre


def count_types(gop: int, bframes: int, a: int, b: int) -> np.ndarray:
    """Frames of each type among native frames a..b inclusive (GOPs start at multiples of gop)."""
    if b < a:
        return np.zeros(3, dtype=np.int64)
    pre = _prefix(gop, bframes)

    def upto(x: int) -> np.ndarray:  # frames < x
        q, r = divmod(x, gop)
        return q * pre[:, gop] + pre[:, r]

    return upto(b + 1) - upto(a)


def is_ref(gop: int, bframes: int, f: int) -> bool:
    return frame_types(gop, bframes)[f % gop] != B


@dataclass
class WindowDecode:
    types: np.ndarray  # decoded frames by type (I, P, B)
    kept: int  # frames returned
    chunks: int  # chunks touched (one range read each per group)
    opens: int  # decoder contexts opened (one per chunk with kept frames)
    skipped: int = 0  # non-reference packets fed to the decoder and dropped (skip_frame=NONREF)


def decoded_counts(
    gop: int, bframes: int, frames_per_chunk: int, first: int, last: int, every: int, total_frames: int
) -> WindowDecode:
    """What EpisodeReader decodes for one camera when a window selects native frames first..last.

    Chunks hold `frames_per_chunk` frames (whole GOPs). Kept frames are every `every`-th from
    the first reference frame among the first `every`; a chunk whose kept frames are all
    references is decoded with non-reference frames skipped. The decoder stops when its
    last wanted frame comes out; with B-frames that is one reference later (reorder delay).
    """
    first, last = max(0, first), min(total_frames - 1, last)
    types = np.zeros(3, dtype=np.int64)
    if last < first:
        return WindowDecode(types, 0, 0, 0)
    skipped = 0
    phase = 0
    if every > 1:
        head = [j for j in range(min(every, last - first + 1)) if is_ref(gop, bframes, first + j)]
        phase = head[0] if head else 0
    kept_total = chunks = opens = 0
    c0, c1 = first // frames_per_chunk, last // frames_per_chunk
    for c in range(c0, c1 + 1):
        lo, hi = max(first, c * frames_per_chunk), min(last, c * frames_per_chunk + frames_per_chunk - 1)
        chunk_end = min(total_frames - 1, c * frames_per_chunk + frames_per_chunk - 1)
        chunks += 1
        # kept frames: (f - first) % every == phase
        k0 = lo + ((phase - (lo - first)) % every)
        if k0 > hi:
            continue
        k1 = k0 + ((hi - k0) // every) * every
        n_kept = (k1 - k0) // every + 1
        kept_total += n_kept
        opens += 1
        start = (k0 // gop) * gop
        skip = every > 1 and all(is_ref(gop, bframes, f) for f in range(k0, k1 + 1, every))
        counted = count_types(gop, bframes, start, k1).copy()
        if skip:
            skipped += int(counted[B])
            counted[B] = 0
        if bframes > 0 and k1 < chunk_end:  # reorder delay: the next reference is decoded too
            nxt = k1 + 1
            while nxt < chunk_end and not is_ref(gop, bframes, nxt):
                nxt += 1
            counted[frame_types(gop, bframes)[nxt % gop]] += 1
        types += counted
    return WindowDecode(types, kept_total, chunks, opens, skipped)


@lru_cache(maxsize=4096)
def decode_order(gop: int, bframes: int) -> tuple[int, ...]:
    """Display positions of one GOP in decode order: I, then each reference before the B-frames it closes."""
    refs = [p for p, t in enumerate(frame_types(gop, bframes)) if t != B]
    order = [0]
    for prev, r in itertools.pairwise(refs):
        order += [r] + list(range(prev + 1, r))
    return tuple(order)


def decoded_counts_gopwise(
    gop: int, bframes: int, frames_per_chunk: int, first: int, last: int, every: int, total_frames: int
) -> WindowDecode:
    """What the delivery dataset's GopDecoder decodes for one camera and one sample: each GOP
    holding a wanted frame is fed from its keyframe up to its last wanted packet (decode order),
    unwanted non-reference packets are never sent (`skipped` counts them, at no cost); one decoder
    per GOP. Fetches cover first-1..last+1."""
    types_of = frame_types(gop, bframes)
    order = decode_order(gop, bframes)
    wanted = sorted({min(max(f, 0), total_frames - 1) for f in range(first, last + 1, every)})
    types = np.zeros(3, dtype=np.int64)
    skipped = opens = 0
    by_gop: dict[int, set[int]] = {}
    for f in wanted:
        by_gop.setdefault(f // gop, set()).add(f % gop)
    for g, pos in by_gop.items():
        opens += 1
        upto = max(order.index(p) for p in pos)
        for p in order[: upto + 1]:
            if g * gop + p >= total_frames:
                continue
            t = types_of[p]
            if t == B and p not in pos:
                skipped += 1
            else:
                types[t] += 1
    lo, hi = max(0, first - 1), min(total_frames - 1, last + 1)
    chunks = hi // frames_per_chunk - lo // frames_per_chunk + 1
    return WindowDecode(types, len(wanted) if first <= last else 0, chunks, opens, skipped)
