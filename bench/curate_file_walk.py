"""The old way to build a manifest: walk every episode's files (baseline for bench.curate).

Each episode on local disk is a small container file `<id>.rdep` (a length-prefixed
JSON header with cameras/rates/footer fields, then the proprio timestamps as int64)
plus a sidecar `<id>.json` (site, robot, task, success, quality, QC, batch, ...).
Building a manifest the old way touches each episode four times: an existence check,
the sidecar read, the header read, and a timestep count from the timestamp payload.
The rows then go through the same spec evaluation as the catalog path, so both
produce the same manifest rows.
"""

from __future__ import annotations

import json
import os
import struct
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from robodata.catalog.schema import CATALOG_SCHEMA

HEADER_FMT = "<4sI"  # magic, header json length
MAGIC = b"RDEP"
SIDECAR_KEYS = ("site", "robot", "task", "vendor", "start_time", "day", "duration_s", "success",
                "quality_score", "qc_status", "ingest_batch")


def write_episode_files(root: Path, rows: pa.Table) -> None:
    """Write one container + sidecar per catalog row under root/<site>/<robot>/."""
    for r in rows.to_pylist():
        d = root / r["site"] / r["robot"]
        d.mkdir(parents=True, exist_ok=True)
        n = int(r["num_state_steps"])
        header = json.dumps({
            "episode_id": r["episode_id"], "cameras": r["cameras"], "stream_rates": json.loads(r["stream_rates_json"]),
            "layout_version": r["layout_version"], "num_frames": r["num_frames"], "state_steps": n,
            "footer_offset": r["footer_offset"], "footer_length": r["footer_length"], "size_bytes": r["size_bytes"],
        }).encode()
        ts = (np.arange(n, dtype=np.int64) * 10_000_000)
        with open(d / f"{r['episode_id']}.rdep", "wb") as f:
            f.write(struct.pack(HEADER_FMT, MAGIC, len(header)) + header)
            f.write(ts.tobytes())
        side = {k: r[k] for k in SIDECAR_KEYS}
        side["start_time"] = r["start_time"].isoformat()
        (d / f"{r['episode_id']}.json").write_text(json.dumps(side))


def walk(root: Path) -> pl.DataFrame:
    """Catalog rows rebuilt from the files: exists check, sidecar, header, timestep count."""
    out: list[dict] = []
    for dirpath, _dirs, files in os.walk(Path(root).resolve()):
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            ep = name[:-5]
            container = os.path.join(dirpath, ep + ".rdep")
            if not os.path.exists(container):                                  # 1. exists check
                continue
            with open(os.path.join(dirpath, name)) as f:                       # 2. sidecar read
                side = json.load(f)
            with open(container, "rb") as f:
                magic, hlen = struct.unpack(HEADER_FMT, f.read(struct.calcsize(HEADER_FMT)))
                if magic != MAGIC:
                    raise ValueError(f"{container}: not an episode container")
                header = json.loads(f.read(hlen))                              # 3. header read
                steps = len(np.frombuffer(f.read(), dtype=np.int64))           # 4. timestep count
            out.append({
                "episode_id": ep, "uri": container, **side,
                "start_time": datetime.fromisoformat(side["start_time"]).astimezone(timezone.utc),
                "num_frames": header["num_frames"], "num_state_steps": steps, "cameras": header["cameras"],
                "stream_rates_json": json.dumps(header["stream_rates"]), "layout_version": header["layout_version"],
                "size_bytes": header["size_bytes"], "footer_offset": header["footer_offset"],
                "footer_length": header["footer_length"],
            })
    table = pa.Table.from_pylist(out).select(CATALOG_SCHEMA.names).cast(CATALOG_SCHEMA)
    return pl.from_arrow(table)
