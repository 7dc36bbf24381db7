"""Reading an .rrd back with Rerun's own reader (rerun.chunk.RrdReader) for the viewer tests."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import av
import numpy as np
import pyarrow as pa

from robodata.container import EpisodeReader


def rrd_columns(path: Path) -> dict[str, dict[str, list]]:
    """{entity path: {column: values in time order}} over every chunk of the recording."""
    from rerun.chunk import RrdReader

    rows: dict[str, list[dict]] = defaultdict(list)
    for ch in RrdReader(str(path)).stream():
        rb = ch.to_record_batch()
        table = pa.Table.from_batches([rb])
        for i, f in enumerate(table.schema):
            if pa.types.is_duration(f.type) or pa.types.is_timestamp(f.type):  # ns as int64 (datetime has us)
                table = table.set_column(i, f.name, table.column(i).cast(pa.int64()))
        for r in table.to_pylist():
            rows[ch.entity_path].append({k: v for k, v in r.items() if k != "rerun.controls.RowId"})
    out: dict[str, dict[str, list]] = {}
    for ent, rs in rows.items():
        if any("episode_time" in r for r in rs):
            rs = sorted((r for r in rs if r.get("episode_time") is not None), key=lambda r: r["episode_time"])
        cols: dict[str, list] = defaultdict(list)
        for r in rs:
            for k, v in r.items():
                cols[k].append(v)
        out[ent] = dict(cols)
    return out


def sample_bytes(values: list) -> list[bytes]:
    """VideoStream:sample cells (a list of one blob, each a list of bytes or bytes) as bytes."""
    out = []
    for v in values:
        blob = v[0] if isinstance(v, list) and v and not isinstance(v[0], int) else v
        out.append(bytes(blob))
    return out


def decode(codec: str, samples: list[bytes]) -> np.ndarray:
    """Frames of Annex B / OBU samples through a fresh PyAV decoder (no extradata: the keyframes
    must carry their parameter sets)."""
    ctx = av.CodecContext.create({"h264": "h264", "hevc": "hevc", "av1": "libdav1d"}[codec], "r")
    frames = []
    for i, s in enumerate(samples):
        pkt = av.Packet(s)
        pkt.pts = i
        frames += [f.to_ndarray(format="rgb24") for f in ctx.decode(pkt)]
    frames += [f.to_ndarray(format="rgb24") for f in ctx.decode(None)]
    return np.stack(frames)


def stored_times(path: Path, stream: str) -> np.ndarray:
    """The container's t_ns of every sample of `stream`, in presentation order."""
    r = EpisodeReader.open(path)
    out = []
    for c, p, blob in r.fetch_parts({stream: (-(1 << 62), 1 << 62)}):
        t = r.part_table(c, p, blob)
        order = np.argsort(t.column("pts").to_numpy()) if "pts" in t.column_names else slice(None)
        out.append(t.column("t_ns").to_numpy()[order])
    return np.concatenate(out)
