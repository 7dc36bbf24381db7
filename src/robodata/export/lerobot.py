"""Export manifest episodes as a LeRobot v3.0 dataset (offline, local directory).

Layout (LeRobot `codebase_version` v3.0: many episodes per file, relational metadata):

    meta/info.json                              features, fps, path templates, totals
    meta/stats.json                             per-feature min/max/mean/std/count
    meta/tasks.parquet                          task string (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet    one row per episode: length, tasks, data and
                                                video file indices, from/to indices and timestamps
    data/chunk-000/file-000.parquet             one row per frame: observation.state, action,
                                                timestamp, frame_index, episode_index, index, task_index
    videos/observation.images.<cam>/chunk-000/file-000.mp4   all episodes back to back (H.264)

The dataset clock is the nominal grid k / fps (fps: the episodes' most common camera rate, rounded
to an integer within 1 %; every episode within RATE_TOLERANCE of it); each camera contributes its
nearest frame to each grid time and state and action are the latest samples at or before it
(sample-and-hold). Every episode is validated before anything is written and the dataset is
written to a temporary folder that is renamed into place (a failure leaves nothing). All
episodes go into file-000 of chunk-000 (one data file, one video file per camera); files are not
rotated by size.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robodata.export.episodes import (
    EpisodeStreams,
    ExportError,
    arrays,
    check_ids,
    frames,
    open_episode,
    out_path,
    sample_at,
    staging,
)

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
RATE_TOLERANCE = 0.05  # an episode's frame rate may be this far off the dataset's nominal rate


class _Stats:
    """Running min/max/mean/std per feature (vector features, or per channel for images)."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self.s: dict[str, np.ndarray] = {}
        self.ss: dict[str, np.ndarray] = {}
        self.lo: dict[str, np.ndarray] = {}
        self.hi: dict[str, np.ndarray] = {}

    def add(self, key: str, x: np.ndarray) -> None:
        x = x.astype(np.float64).reshape(len(x), -1)
        if key not in self.n:
            self.n[key], self.s[key], self.ss[key] = 0, np.zeros(x.shape[1]), np.zeros(x.shape[1])
            self.lo[key], self.hi[key] = np.full(x.shape[1], np.inf), np.full(x.shape[1], -np.inf)
        self.n[key] += len(x)
        self.s[key] += x.sum(0)
        self.ss[key] += (x * x).sum(0)
        self.lo[key] = np.minimum(self.lo[key], x.min(0))
        self.hi[key] = np.maximum(self.hi[key], x.max(0))

    def get(self, key: str, image: bool = False) -> dict[str, Any]:
        n = self.n[key]
        mean = self.s[key] / n
        std = np.sqrt(np.maximum(self.ss[key] / n - mean * mean, 0.0))

        def shape(v: np.ndarray) -> list:
            return v.reshape(3, 1, 1).tolist() if image else v.tolist()

        return {
            "min": shape(self.lo[key]),
            "max": shape(self.hi[key]),
            "mean": shape(mean),
            "std": shape(std),
            "count": [n],
        }


def nominal_rate(rates: list[float]) -> float:
    """The dataset frame rate: the most common episode rate (ties: the first episode's), each rounded
    to an integer when within 1 % of it (measured 29.93-30.02 Hz export at 30 Hz)."""
    from collections import Counter

    def snap(x: float) -> float:
        r = round(x)
        return float(r) if r > 0 and abs(x / r - 1) <= 0.01 else float(x)

    return Counter(snap(r) for r in rates).most_common(1)[0][0]


def validate(rows: list[dict[str, Any]]) -> tuple[EpisodeStreams, float]:
    """Open every episode (footers only) before anything is written: one set of cameras, frame
    shapes and state / action dimensions, and rates within RATE_TOLERANCE of the nominal rate.
    Returns the first episode (open) and the nominal rate.

    Raises:
        ExportError: naming the episode and what differs (or why its container cannot be read).
    """
    check_ids(rows)
    first: EpisodeStreams | None = None
    rates: list[tuple[str, float]] = []
    for row in rows:
        eid = row["episode_id"]
        try:
            ep = open_episode(row["uri"], row.get("footer_offset"), row.get("footer_length"))
        except ExportError as exc:
            raise ExportError(f"episode {eid!r}: {exc}") from None
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
    return first, fps


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
    rows: list[dict[str, Any]], out_dir: str | Path, robot_type: str = "robodata", progress=lambda n: None
) -> dict[str, Any]:
    """Write the rows' episodes as one LeRobot v3.0 dataset at `out_dir`.

    Every episode is validated first (`validate`); frames are taken on the nominal grid k / fps
    (each camera's nearest frame, state / action sample-and-hold); the dataset is written into a
    temporary folder next to `out_dir` and renamed, so a failure leaves nothing behind.
    """
    out = Path(out_dir)
    if (out / "meta" / "info.json").exists():
        raise ExportError(f"{out} already holds a LeRobot dataset; export into an empty directory")
    if not rows:
        raise ExportError("manifest selects no episodes; nothing to export")
    # LeRobot's splits are episode-index ranges: the train episodes first, then val (each in row order)
    rows = sorted(rows, key=lambda r: r.get("split", "train") != "train")
    first, fps = validate(rows)
    try:
        with staging(out) as tmp:
            result = _write(rows, first, fps, tmp, robot_type, progress)
    finally:
        first.reader.close()
    result["dir"] = str(out)
    return result


def _write(rows: list[dict[str, Any]], first: EpisodeStreams, fps: float, out: Path, robot_type: str, progress) -> dict:
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
    videos = {c: _VideoOut(video_files[c], shapes[c], fps) for c in cams}
    stats = _Stats()
    data_writer: pq.ParquetWriter | None = None
    episodes: list[dict[str, Any]] = []
    index = 0
    try:
        for ep_index, row in enumerate(rows):
            ep = (
                first if ep_index == 0 else open_episode(row["uri"], row.get("footer_offset"), row.get("footer_length"))
            )
            task = ep.reader.meta.task or row.get("task") or ""
            task_index = tasks.setdefault(task, len(tasks))
            lowdim = arrays(ep)
            video_from = {c: videos[c].frames / fps for c in cams}
            length = 0
            ep_stats = _Stats()
            for t, imgs in frames(ep, grid_fps=fps):
                n = len(t)
                for c in cams:
                    videos[c].write(imgs[c])
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
                for feat, stream in (("observation.state", ep.state), ("action", ep.action or ep.state)):
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
    _write_tasks(files["tasks"], tasks)
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
    for feat, stream in (("observation.state", first.state), ("action", first.action or first.state)):
        if stream:
            spec = streams[stream]
            dim = int(np.prod(spec.shape)) if spec.shape else 1
            names = list(spec.names) if spec.names else [f"{stream}_{i}" for i in range(dim)]
            feats[feat] = {"dtype": "float32", "shape": [dim], "names": names}
    feats["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    for k in ("frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "int64", "shape": [1], "names": None}
    return feats


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """tasks.parquet as pandas writes it: `task` is the index, `task_index` the column."""
    names = sorted(tasks, key=lambda n: tasks[n])
    table = pa.table({"task_index": pa.array([tasks[n] for n in names], pa.int64()), "task": pa.array(names)})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    pq.write_table(table, path)


class _VideoOut:
    """One MP4 per camera, episodes appended back to back at a constant frame rate."""

    def __init__(self, path: Path, shape: tuple[int, ...], fps: float):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.container = av.open(str(path), "w")
        rate = Fraction(fps).limit_denominator(1001)
        self.stream = self.container.add_stream("libx264", rate=rate)
        self.stream.height, self.stream.width = int(shape[0]), int(shape[1])
        self.stream.pix_fmt = "yuv420p"
        self.stream.options = {"crf": "20", "preset": "veryfast", "g": "30", "bf": "0"}
        self.stream.codec_context.time_base = 1 / rate
        self.frames = 0

    def write(self, rgb: np.ndarray) -> None:
        for img in rgb:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            frame.pts = self.frames
            self.frames += 1
            for packet in self.stream.encode(frame):
                self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()
