"""Synthetic raw recordings in the legacy form robots upload today.

Per episode directory (`<root>/<episode_id>/`):
    meta.json              robot, site, task, vendor, start time, cameras, rates, outcome
    <camera>/NNNNNN.jpg    one JPEG per frame (quality configurable)
    <camera>/timestamps.csv  device-clock time of each frame, ns
    state.parquet          t_ns (robot clock), joint_pos, joint_cur, cmd (float32 lists)
    events.jsonl           application events {"t_ns", "event"}
    clock_sync.json        per stream [[device_ns, host_ns], ...] sync samples (noisy)
    synth_truth.json       the true clock offsets (for tests; importers ignore it)
    _COMPLETE              written last: the episode is fully on disk

Streams carry rate jitter, per-device clock offsets and optional dropped frames.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from robodata.ingest.synth.episode import SynthEpisode


def _sync_samples(rng: np.random.Generator, offset_ns: int, duration_ns: int) -> list[list[int]]:
    host = np.linspace(0, duration_ns, 8).astype(np.int64)
    return [[int(h + offset_ns + rng.normal(0, 2e5)), int(h)] for h in host]


def write_jpeg_episode(ep: SynthEpisode, root: Path, quality: int = 90) -> Path:
    """Write into `<id>.partial/` and rename when complete, like a robot's uploader would."""
    final = root / ep.episode_id
    d = root / f"{ep.episode_id}.partial"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rng = np.random.default_rng(zlib.crc32(ep.episode_id.encode()))
    for cam in ep.frame_t:
        cd = d / cam
        cd.mkdir(exist_ok=True)
        times = []
        for i, (t, rgb) in enumerate(ep.frames(cam)):
            Image.fromarray(rgb).save(cd / f"{i:06d}.jpg", format="JPEG", quality=quality)
            times.append(t)
        (cd / "timestamps.csv").write_text("t_ns\n" + "\n".join(str(t) for t in times) + "\n")
    table = pa.table(
        {
            "t_ns": pa.array(ep.state_t, pa.int64()),
            "joint_pos": pa.array(list(ep.joint_pos), pa.list_(pa.float32())),
            "joint_cur": pa.array(list(ep.joint_cur), pa.list_(pa.float32())),
            "cmd": pa.array(list(ep.cmd), pa.list_(pa.float32())),
        }
    )
    pq.write_table(table, d / "state.parquet", compression="zstd")
    (d / "events.jsonl").write_text("".join(json.dumps({"t_ns": t, "event": e}) + "\n" for t, e in ep.events))
    dur = int(ep.state_t[-1])
    sync = {c: _sync_samples(rng, off, dur) for c, off in ep.offsets_ns.items()}
    sync["state"] = _sync_samples(rng, 0, dur)
    (d / "clock_sync.json").write_text(json.dumps(sync))
    (d / "synth_truth.json").write_text(json.dumps({"offsets_ns": ep.offsets_ns}))
    (d / "meta.json").write_text(json.dumps(ep.meta, indent=1))
    (d / "_COMPLETE").write_text("")
    shutil.rmtree(final, ignore_errors=True)
    d.rename(final)
    return final
