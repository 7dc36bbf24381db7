"""Export manifest episodes as a LeRobot v3.0 dataset (offline, local directory).

Layout (LeRobot `codebase_version` v3.0: many episodes per file, relational metadata):

    meta/info.json                              features, fps, path templates, totals
    meta/stats.json                             per-feature min/max/mean/std/count
    meta/tasks.parquet                          task string (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet    one row per episode: length, tasks, data and
                                                video file indices, from/to indices and timestamps
    data/chunk-000/file-000.parquet             one row per frame: observation.state, action,
                                                timestamp, frame_index, episode_index, index, task_index
    videos/observation.images.<cam>/chunk-000/file-000.mp4   all episodes back to back (H.264; a
                                                stream-copied camera's own packets, remuxed:
                                                robodata.export.lerobot_remux)

An episode's rows are exactly the container's frames: every frame of its reference camera (the one
with the most frames), or of its state stream when it has no camera; other cameras contribute their
nearest frame, state and action the latest samples at or before the frame (sample-and-hold). Row k
is at timestamp k / fps (fps: the episodes' most common rate, rounded to an integer within 1 %;
every episode within RATE_TOLERANCE of it), as the constant-rate video holds it. The action is the
stream the container's roles name (as the source declared it: `action`, `actions`, a key map's
`cmd`), never a guess: an episode whose action cannot be identified is refused naming its streams.
`robot_type` is the episodes' own (the catalog's), refused when they differ. Every episode is
validated before anything is written and the dataset is written to a temporary folder that is
renamed into place (a failure leaves nothing). All episodes go into file-000 of chunk-000 (one data
file, one video file per camera); files are not rotated by size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robodata.export.episodes import (
    EpisodeStreams,
    ExportError,
    arrays,
    check_ids,
    empty_destination,
    frames,
    open_episode,
    out_path,
    sample_at,
    staging,
)
from robodata.export.lerobot_files import Stats, VideoOut, write_tasks
from robodata.export.lerobot_remux import PacketOut, remux_plan

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
RATE_TOLERANCE = 0.05  # an episode's frame rate may be this far off the dataset's nominal rate


def nominal_rate(rates: list[float]) -> float:
    """The dataset frame rate: the most common episode rate (ties: the first episode's), each rounded
    to an integer when within 1 % of it (measured 29.93-30.02 Hz export at 30 Hz)."""
    from collections import Counter

    def snap(x: float) -> float:
        r = round(x)
        return float(r) if r > 0 and abs(x / r - 1) <= 0.01 else float(x)

    return Counter(snap(r) for r in rates).most_common(1)[0][0]


def validate(rows: list[dict[str, Any]]) -> tuple[EpisodeStreams, float, str | None]:
    """Open every episode (footers only) before anything is written: one set of cameras, frame
    shapes and state / action dimensions, an identified action stream, one robot_type and rates
    within RATE_TOLERANCE of the nominal rate. Returns the first episode (open), the nominal rate
    and the robot_type (None when the episodes declare none).

    Raises:
        ExportError: naming the episode and what differs (or why its container cannot be read).
    """
    check_ids(rows)
    first: EpisodeStreams | None = None
    rates: list[tuple[str, float]] = []
    robots: dict[str, str] = {}  # robot_type -> the first episode with it
    for row in rows:
        eid = row["episode_id"]
        try:
            ep = open_episode(row)
        except ExportError as exc:
            raise ExportError(f"episode {eid!r}: {exc}") from None
        _identified(ep, eid)
        robots.setdefault(str(ep.reader.meta.extra.get("robot_type") or ""), eid)
        if first is None:
            first = ep
        else:
            _same_features(first, ep, eid)
            ep.reader.close()
        if not (np.isfinite(ep.fps) and ep.fps > 0):
            raise ExportError(f"episode {eid!r}: field fps: frame rate {ep.fps!r} is not a rate")
        rates.append((eid, ep.fps))
    assert first is not None
    fps = nominal_rate([r for _, r in rates])
    off = [(e, r) for e, r in rates if abs(r / fps - 1) > RATE_TOLERANCE]
    if off:
        raise ExportError(
            f"episode {off[0][0]!r}: field fps: {off[0][1]:.3f} Hz is more than {RATE_TOLERANCE:.0%} off the "
            f"dataset's {fps:g} Hz ({len(off)} episode(s)); export them separately"
        )
    if len(robots) > 1:
        (a, ea), (b, eb) = list(robots.items())[:2]
        first.reader.close()
        raise ExportError(
            f"episode {eb!r}: field robot_type: {b!r} vs episode {ea!r}'s {a!r}; a LeRobot dataset has one "
            "robot_type: export them separately"
        )
    return first, fps, next(iter(robots)) or None


def _identified(ep: EpisodeStreams, eid: str) -> None:
    """An export writes the recorded state and action or refuses: both streams must be identified
    (container roles, or robodata's / the source's declared names), never guessed."""
    arrays = [s for s, spec in ep.reader.meta.streams.items() if spec.kind == "array"]
    for feat, stream, names in (
        ("observation.state", ep.state, "joint_pos, state"),
        ("action", ep.action, "cmd, action, actions"),
    ):
        if stream is None:
            ep.reader.close()
            raise ExportError(
                f"episode {eid!r}: field {feat}: no stream is identified as the {feat.split('.')[-1]} "
                f"(container roles, or a stream named {names}); its array streams are {arrays}: re-ingest "
                "with a key map naming it, or export as MCAP"
            )


def _same_features(first: EpisodeStreams, ep: EpisodeStreams, eid: str) -> None:
    fs, es = first.reader.meta.streams, ep.reader.meta.streams
    if ep.cameras != first.cameras:
        raise ExportError(f"episode {eid!r}: field cameras: {ep.cameras} vs the first's {first.cameras}")
    for c in first.cameras:
        if es[c].shape != fs[c].shape:
            raise ExportError(f"episode {eid!r}: field shape of {c!r}: {es[c].shape} vs the first's {fs[c].shape}")
    for feat, a, b in (("observation.state", first.state, ep.state), ("action", first.action, ep.action)):
        if (a and fs[a].shape) != (b and es[b].shape):
            raise ExportError(f"episode {eid!r}: field {feat}: stream {b!r} differs from the first episode's {a!r}")


def export_lerobot(
    rows: list[dict[str, Any]], out_dir: str | Path, robot_type: str | None = None, progress=lambda n: None
) -> dict[str, Any]:
    """Write the rows' episodes as one LeRobot v3.0 dataset at `out_dir`.

    Every episode is validated first (`validate`); its rows are its container's frames (state /
    action sample-and-hold at each); `robot_type` (default: the episodes' own, the catalog's) goes
    into info.json; the dataset is written into a temporary folder next to `out_dir` and renamed,
    so a failure leaves nothing behind.
    """
    out = Path(out_dir)
    if (out / "meta" / "info.json").exists():
        raise ExportError(f"{out} already holds a LeRobot dataset; export into an empty directory")
    if not rows:
        raise ExportError("manifest selects no episodes; nothing to export")
    empty_destination(out)
    # LeRobot's splits are episode-index ranges: the train episodes first, then val (each in row order)
    rows = sorted(rows, key=lambda r: r.get("split", "train") != "train")
    first, fps, declared = validate(rows)
    try:
        with staging(out) as tmp:
            result = _write(rows, first, fps, tmp, robot_type or declared, progress)
    finally:
        first.reader.close()
    result["dir"] = str(out)
    return result


def _write(
    rows: list[dict[str, Any]], first: EpisodeStreams, fps: float, out: Path, robot_type: str | None, progress
) -> dict:
    cams = first.cameras
    keys = {c: f"observation.images.{c}" for c in cams}
    shapes = {c: first.reader.meta.streams[c].shape for c in cams}
    tasks: dict[str, int] = {}
    # every path written is confined to `out` before anything is created (a camera name, or a
    # symlink already in `out`, cannot lead a write outside it)
    files = {
        "data": out_path(out, DATA_PATH.format(chunk_index=0, file_index=0), "data_path"),
        "episodes": out_path(out, EPISODES_PATH, "episodes_path"),
        "tasks": out_path(out, "meta/tasks.parquet", "tasks_path"),
        "info": out_path(out, "meta/info.json", "info_path"),
        "stats": out_path(out, "meta/stats.json", "stats_path"),
    }
    video_files = {
        c: out_path(out, VIDEO_PATH.format(video_key=keys[c], chunk_index=0, file_index=0), "video_path") for c in cams
    }
    for f in (*files.values(), *video_files.values()):
        f.parent.mkdir(parents=True, exist_ok=True)
    remux = remux_plan(rows, first, cams)  # stream-copied cameras: their packets remuxed, not re-encoded
    videos: dict[str, VideoOut | PacketOut] = {
        c: VideoOut(video_files[c], shapes[c], fps)
        if remux[c]
        else PacketOut(video_files[c], first.reader.layout.group_of(c).video.codec, shapes[c], fps)  # type: ignore[union-attr]
        for c in cams
    }
    stats = Stats()
    data_writer: pq.ParquetWriter | None = None
    episodes: list[dict[str, Any]] = []
    index = 0
    try:
        for ep_index, row in enumerate(rows):
            ep = first if ep_index == 0 else open_episode(row)
            task = ep.reader.meta.task or row.get("task") or ""
            task_index = tasks.setdefault(task, len(tasks))
            lowdim = arrays(ep)
            video_from = {c: videos[c].frames / fps for c in cams}
            length = 0
            ep_stats = Stats()
            for t, imgs in frames(ep):
                n = len(t)
                for c in cams:
                    if isinstance(out_c := videos[c], VideoOut):
                        out_c.write(imgs[c])
                    sub = imgs[c][:, ::8, ::8].reshape(-1, 3) / 255.0
                    stats.add(keys[c], sub)
                batch: dict[str, np.ndarray] = {
                    "timestamp": ((length + np.arange(n)) / fps).astype(np.float32),
                    "frame_index": np.arange(length, length + n, dtype=np.int64),
                    "episode_index": np.full(n, ep_index, dtype=np.int64),
                    "index": np.arange(index + length, index + length + n, dtype=np.int64),
                    "task_index": np.full(n, task_index, dtype=np.int64),
                }
                cols: dict[str, Any] = {}
                for feat, stream in (("observation.state", ep.state), ("action", ep.action)):
                    if stream:
                        ts, vals = lowdim[stream]
                        v = sample_at(ts, vals, t)
                        cols[feat] = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])
                        stats.add(feat, v)
                        ep_stats.add(feat, v)
                for k, col in batch.items():
                    cols[k] = pa.array(col)
                    stats.add(k, col)
                    ep_stats.add(k, col)
                table = pa.table(cols)
                if data_writer is None:
                    data_writer = pq.ParquetWriter(files["data"], table.schema)
                data_writer.write_table(table)
                length += n
            if length == 0:
                raise ExportError(f"episode {row['episode_id']!r} has no frames")
            for c in cams:
                if isinstance(out_c := videos[c], PacketOut):
                    out_c.add(ep.reader, c, length)
            rec: dict[str, Any] = {
                "episode_index": ep_index,
                "tasks": [task],
                "length": length,
                "data/chunk_index": 0,
                "data/file_index": 0,
                "dataset_from_index": index,
                "dataset_to_index": index + length,
                "meta/episodes/chunk_index": 0,
                "meta/episodes/file_index": 0,
                "robodata/episode_id": row["episode_id"],
                "robodata/split": row.get("split", "train"),
            }
            for c in cams:
                rec[f"videos/{keys[c]}/chunk_index"] = 0
                rec[f"videos/{keys[c]}/file_index"] = 0
                rec[f"videos/{keys[c]}/from_timestamp"] = video_from[c]
                rec[f"videos/{keys[c]}/to_timestamp"] = video_from[c] + length / fps
            for feat in ep_stats.n:
                for stat, value in ep_stats.get(feat).items():
                    rec[f"stats/{feat}/{stat}"] = value
            episodes.append(rec)
            index += length
            progress(1)
    finally:
        for video in videos.values():
            video.close()
        if data_writer is not None:
            data_writer.close()
    pq.write_table(pa.Table.from_pylist(episodes), files["episodes"])
    write_tasks(files["tasks"], tasks)
    features = _features(first, cams, keys, shapes, fps)
    all_stats = {k: stats.get(k, image=k.startswith("observation.images.")) for k in stats.n}
    n_train = sum(e["robodata/split"] == "train" for e in episodes)
    splits = {"train": f"0:{n_train}", "val": f"{n_train}:{len(episodes)}"}
    splits = {k: v for k, v in splits.items() if v.split(":")[0] != v.split(":")[1]}
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(episodes),
        "total_frames": index,
        "total_tasks": len(tasks),
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 500,
        "fps": fps,
        "splits": splits,
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if cams else None,
        "features": features,
    }
    files["info"].write_text(json.dumps(info, indent=2))
    files["stats"].write_text(json.dumps(all_stats, indent=2))
    return {
        "format": "lerobot",
        "dir": str(out),
        "episodes": len(episodes),
        "frames": index,
        "tasks": len(tasks),
        "cameras": cams,
        "fps": fps,
        "video": {c: "remux" if not remux[c] else f"encode: {remux[c]}" for c in cams},
    }


def _features(first, cams, keys, shapes, fps) -> dict[str, Any]:
    feats: dict[str, Any] = {}
    for c in cams:
        h, w, _ = shapes[c]
        feats[keys[c]] = {
            "dtype": "video",
            "shape": [h, w, 3],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": h,
                "video.width": w,
                "video.codec": "h264",
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": fps,
                "video.channels": 3,
                "has_audio": False,
            },
        }
    streams = first.reader.meta.streams
    for feat, stream in (("observation.state", first.state), ("action", first.action)):
        if stream:
            spec = streams[stream]
            dim = int(np.prod(spec.shape)) if spec.shape else 1
            names = list(spec.names) if spec.names else [f"{stream}_{i}" for i in range(dim)]
            feats[feat] = {"dtype": "float32", "shape": [dim], "names": names}
    feats["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    for k in ("frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "int64", "shape": [1], "names": None}
    return feats
