"""Log one loader sample: what the model sees, next to the episode it was cut from.

    sample/<camera>     Image per returned frame (the loader's own tensor, uint8, exact), at
                        the step's target time on `episode_time`
    sample/<stream>     Scalars per returned step of an array stream
    sample/info         TextLog: manifest row, anchor, pattern, padded steps
and the episode's streams over the sample's window (robodata.viz.record), so the frames the
loader picked can be compared with the stored video around them.
"""

from __future__ import annotations

import numpy as np
import rerun as rr

from robodata.viz.qc import QcFinding
from robodata.viz.record import TIMELINE, ViewStats, log_episode
from robodata.viz.select import DrawnSample


def sample_path(stream: str) -> str:
    return f"sample/{stream}"


def _frames(x: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) uint8 from the loader's uint8 (T, H, W, 3) or float32 (T, 3, H, W) in [0, 1]."""
    if x.dtype == np.uint8:
        return x
    return np.clip(np.rint(x.transpose(0, 2, 3, 1) * 255.0), 0, 255).astype(np.uint8)


def log_sample(drawn: DrawnSample, rec: rr.RecordingStream, qc: list[QcFinding] | None = None) -> ViewStats:
    """Log the sample's tensors and the episode over its window; returns the episode's ViewStats."""
    meta = drawn.reader.meta
    padded = []
    for s, times in drawn.times.items():
        value = drawn.tensors[s].numpy()
        pad = drawn.tensors[f"{s}_is_pad"].numpy()
        if pad.any():
            padded.append(f"{s}: {int(pad.sum())} of {len(pad)} steps padded")
        for i, t in enumerate(times):
            rec.set_time(TIMELINE, duration=np.timedelta64(int(round(t * 1e9)), "ns"))
            if meta.streams[s].kind == "video":
                rec.log(sample_path(s), rr.Image(_frames(value)[i]))
            else:
                rec.log(sample_path(s), rr.Scalars(np.asarray(value[i], dtype=np.float64).ravel()))
    rec.set_time(TIMELINE, duration=np.timedelta64(int(round(drawn.t * 1e9)), "ns"))
    text = f"manifest row {drawn.row} ({meta.episode_id}), anchor t = {drawn.t:.3f} s"
    rec.log(sample_path("info"), rr.TextLog(text + ("; " + "; ".join(padded) if padded else "")))
    rec.reset_time()
    lo, hi = drawn.window
    return log_episode(drawn.reader, rec, t0=max(lo, 0.0), t1=hi, qc=qc)
