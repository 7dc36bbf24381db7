"""The old way to build a manifest: walk every episode's files (baseline for bench.curate).

Each episode on local disk is a real robodata container `<id>.rdep` (proprio and event
streams only, 8-16 s, so 10,000 of them stay small) plus a sidecar `<id>.json` with
what the container does not know (success, quality, QC status, ingest batch).
Building a manifest without a catalog touches each episode four times:

1. an existence check of the container,
2. the sidecar read,
3. the header read (`EpisodeReader.open`: trailer + footer index),
4. a timestep count (decoding the main proprio stream).

The rows then go through the same spec evaluation (`robodata.curate.select.evaluate`)
as the catalog path, so both produce the same manifest rows.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from robodata.catalog.rows import conform
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup

LAYOUT = Layout(groups=(TopicGroup("proprio", ("joint_pos", "cmd"), 10.0), TopicGroup("events", ("events",), 60.0)))
SIDECAR_KEYS = ("success", "quality_score", "qc_status", "ingest_batch")


def write_episode_files(root: Path, rows: pa.Table) -> None:
    """One small container + sidecar per synthetic catalog row, under root/<site>/<robot>/."""
    for i, r in enumerate(rows.to_pylist()):
        d = root / r["site"] / r["robot"]
        d.mkdir(parents=True, exist_ok=True)
        streams = {
            "joint_pos": StreamSpec("joint_pos", "array", 100.0, (7,), units="rad"),
            "cmd": StreamSpec("cmd", "array", 50.0, (7,), units="rad"),
            "events": StreamSpec("events", "events"),
        }
        start_ns = int(r["start_time"].timestamp() * 1e6) * 1000
        meta = EpisodeMeta(r["episode_id"], r["robot"], r["site"], r["task"], start_ns, streams, vendor=r["vendor"])
        seconds = 8 + (i % 9)
        tj = (np.arange(seconds * 100) * 10_000_000).astype(np.int64)
        tc = (np.arange(seconds * 50) * 20_000_000).astype(np.int64)
        with EpisodeWriter(d / f"{r['episode_id']}.rdep", meta, LAYOUT) as w:
            w.write_array("joint_pos", tj, np.sin(tj[:, None] / 1e9 + np.arange(7)).astype(np.float32))
            w.write_array("cmd", tc, np.cos(tc[:, None] / 1e9 + np.arange(7)).astype(np.float32))
            w.write_events("events", np.array([0, tj[-1]], dtype=np.int64), ["start", "end"])
        (d / f"{r['episode_id']}.json").write_text(json.dumps({k: r[k] for k in SIDECAR_KEYS}))


def walk(root: Path) -> pl.DataFrame:
    """Catalog rows rebuilt from the files: exists check, sidecar, header, timestep count."""
    out: list[dict] = []
    for dirpath, _dirs, files in os.walk(Path(root).resolve()):
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            container = os.path.join(dirpath, name[:-5] + ".rdep")
            if not os.path.exists(container):  # 1. exists check
                continue
            with open(os.path.join(dirpath, name)) as f:  # 2. sidecar read
                side = json.load(f)
            r = EpisodeReader.open(container)  # 3. header read
            m = r.meta
            steps = len(r.read_window(0.0, m.duration_s + 1.0, streams=["joint_pos"])["joint_pos"].t)  # 4. count
            start = datetime.fromtimestamp(m.start_time_ns / 1e9, tz=UTC)
            out.append(
                {
                    "episode_id": m.episode_id,
                    "uri": container,
                    "site": m.site,
                    "robot": m.robot,
                    "task": m.task,
                    "vendor": m.vendor,
                    "start_time": start,
                    "day": start.strftime("%Y-%m-%d"),
                    "duration_s": float(m.duration_s),
                    "num_frames": 0,
                    "num_state_steps": steps,
                    "cameras": [],
                    "stream_rates_json": json.dumps(
                        {s: v.rate_hz for s, v in m.streams.items() if v.kind != "events"}, sort_keys=True
                    ),
                    "layout_version": r.layout_version,
                    "size_bytes": r.source.size(),
                    "footer_offset": r.footer_offset,
                    "footer_length": r.footer_length,
                    **side,
                }
            )
    table = conform(out)  # columns the walk does not read (QC facts, mixing facts) are null
    return pl.DataFrame(table)
