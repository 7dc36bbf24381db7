"""LeRobot datasets (codebase v2.1 and v3.0) from a local directory: parquet + mp4 (H.264 / AV1).

v2.1: one parquet and one mp4 per camera per episode; meta/episodes.jsonl, meta/tasks.jsonl.
v3.0: many episodes per parquet / mp4 file; meta/episodes/*/*.parquet gives each episode's
row range and per-camera [from_timestamp, to_timestamp) inside its video file; meta/tasks.parquet.
Frame times come from the video packets (demuxed, not decoded); the parquet `timestamp`
column is the state clock. Their mismatch is the camera's alignment error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robodata.ingest.clock import ClockFit, fit_offset
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError

INDEX_COLUMNS = {"timestamp", "frame_index", "episode_index", "index", "task_index"}
ARRAY_NAMES = {
    "observation.state": "joint_pos",
    "action": "cmd",
    "observation.effort": "joint_cur",
    "observation.velocity": "joint_vel",
}


@dataclass
class LeRobotEpisode:
    index: int
    length: int
    version: str
    tasks: list[str]
    row: dict  # v3.0: the episodes-parquet row (file indices, ranges)


def _info(root: Path) -> dict:
    try:
        info = json.loads((root / "meta" / "info.json").read_text())
    except FileNotFoundError:
        raise RawEpisodeError(f"{root}: meta/info.json missing (not a LeRobot dataset)") from None
    except json.JSONDecodeError as exc:
        raise RawEpisodeError(f"{root}/meta/info.json: invalid JSON ({exc})") from None
    ver = str(info.get("codebase_version", ""))
    if ver not in ("v2.0", "v2.1", "v3.0"):
        raise RawEpisodeError(f"{root}: unsupported LeRobot codebase_version {ver!r} (v2.1 or v3.0)")
    return info


def dataset_episodes(uri: str) -> list[LeRobotEpisode]:
    root = Path(uri.split("#", 1)[0])
    info = _info(root)
    ver = "v3.0" if info["codebase_version"] == "v3.0" else "v2.1"
    if ver == "v2.1":
        rows = [json.loads(x) for x in (root / "meta" / "episodes.jsonl").read_text().splitlines() if x.strip()]
        return [
            LeRobotEpisode(int(r["episode_index"]), int(r["length"]), ver, list(r.get("tasks", [])), r) for r in rows
        ]
    out = []
    for f in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        for r in pq.read_table(f).to_pylist():
            out.append(LeRobotEpisode(int(r["episode_index"]), int(r["length"]), ver, list(r.get("tasks") or []), r))
    return sorted(out, key=lambda e: e.index)


def _video_path(root: Path, info: dict, ep: LeRobotEpisode, key: str) -> tuple[Path, float, float]:
    if ep.version == "v2.1":
        chunk = ep.index // int(info.get("chunks_size", 1000))
        p = info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=ep.index)
        return root / p, 0.0, float("inf")
    r = ep.row
    p = info["video_path"].format(
        video_key=key, chunk_index=int(r[f"videos/{key}/chunk_index"]), file_index=int(r[f"videos/{key}/file_index"])
    )
    return root / p, float(r[f"videos/{key}/from_timestamp"]), float(r[f"videos/{key}/to_timestamp"])


def _data_path(root: Path, info: dict, ep: LeRobotEpisode) -> Path:
    if ep.version == "v2.1":
        chunk = ep.index // int(info.get("chunks_size", 1000))
        return root / info["data_path"].format(episode_chunk=chunk, episode_index=ep.index)
    return root / info["data_path"].format(
        chunk_index=int(ep.row["data/chunk_index"]), file_index=int(ep.row["data/file_index"])
    )


def episode_files(root: str | Path, index: int) -> list[str]:
    """Files open_lerobot reads for one episode besides meta/, relative to the dataset root
    (so a remote dataset is staged per episode, never whole). [] for an unknown index."""
    root = Path(root)
    info = _info(root)
    ep = {e.index: e for e in dataset_episodes(str(root))}.get(index)
    if ep is None:
        return []
    try:
        paths = [_data_path(root, info, ep)] + [
            _video_path(root, info, ep, k)[0]
            for k, ft in info.get("features", {}).items()
            if ft.get("dtype") == "video"
        ]
    except (KeyError, ValueError, TypeError) as exc:
        raise RawEpisodeError(f"{root}/meta: bad path template or episode row ({type(exc).__name__}: {exc})") from None
    return sorted({str(p.relative_to(root)) for p in paths})


def _data(root: Path, info: dict, ep: LeRobotEpisode):
    path = _data_path(root, info, ep)
    try:
        t = pq.read_table(path)
    except Exception as exc:
        raise RawEpisodeError(f"{path}: unreadable parquet ({type(exc).__name__}: {exc})") from None
    t = t.filter(pc.equal(t.column("episode_index"), ep.index))
    if t.num_rows == 0:
        raise RawEpisodeError(f"{path}: no rows for episode {ep.index}")
    return t


def _packet_times(path: Path, t_from: float, t_to: float) -> np.ndarray:
    """Presentation times (s) of the video's frames inside [t_from, t_to), from the demuxer only."""
    try:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            tb = float(s.time_base)
            pts = sorted(p.pts * tb for p in c.demux(s) if p.pts is not None)
    except Exception as exc:
        raise RawEpisodeError(f"{path}: unreadable video ({type(exc).__name__}: {exc})") from None
    eps = 1e-4
    return np.array([x for x in pts if t_from - eps <= x < t_to - eps], np.float64)


def _decode(path: Path, t_from: float, t_to: float, n: int):
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        if t_from > 0:
            c.seek(int(t_from / float(s.time_base)), stream=s, backward=True, any_frame=False)
        k = 0
        for frame in c.decode(s):
            ts = frame.time if frame.time is not None else 0.0
            if ts < t_from - 1e-4:
                continue
            if ts >= t_to - 1e-4 or k >= n:
                return
            yield frame  # yuv420p as decoded: the encoder takes it without an RGB round trip
            k += 1


def open_lerobot(uri: str) -> RawEpisode:
    root_s, _, idx_s = uri.partition("#")
    root = Path(root_s)
    info = _info(root)
    eps = {e.index: e for e in dataset_episodes(root_s)}
    try:
        ep = eps[int(idx_s or 0)]
    except (KeyError, ValueError):
        raise RawEpisodeError(f"{uri}: no such episode (dataset has {len(eps)})") from None
    fps = float(info.get("fps", 30))
    table = _data(root, info, ep)
    ts = np.asarray(table.column("timestamp").to_numpy(), np.float64)
    t_state = np.round(ts * 1e9).astype(np.int64)
    arrays = {}
    feats = info.get("features", {})
    for key, ft in feats.items():
        if ft.get("dtype") in ("video", "image", "string") or key in INDEX_COLUMNS or key not in table.column_names:
            continue
        vals = np.asarray(table.column(key).to_pylist(), np.float32).reshape(table.num_rows, -1)
        names = ft.get("names")
        names = tuple(names) if isinstance(names, list) and all(isinstance(x, str) for x in names) else ()
        arrays[ARRAY_NAMES.get(key, key.replace(".", "_"))] = ArrayTrack(t_state, vals, fps, "", names, "state")
    cams, clocks, sources = {}, {}, {}
    for key, ft in feats.items():
        if ft.get("dtype") != "video":
            continue
        name = key.rsplit(".", 1)[-1]
        path, t_from, t_to = _video_path(root, info, ep, key)
        pts = _packet_times(path, t_from, t_to)
        if len(pts) == 0:
            raise RawEpisodeError(f"{path}: no frames in [{t_from}, {t_to}) for episode {ep.index}")
        t_cam = np.round((pts - t_from) * 1e9).astype(np.int64)
        h, w = int(ft["shape"][0]), int(ft["shape"][1])
        cams[name] = CameraTrack(t_cam, h, w, float(ft.get("info", {}).get("video.fps", fps)))
        n = min(len(t_cam), len(t_state))
        clocks[name] = fit_offset(t_cam[:n], t_state[:n]) if n >= 2 else ClockFit(1.0, 0.0, 0.0, 0)
        sources[name] = (path, t_from, t_to, len(t_cam))
    task_names = ep.tasks or [""]

    def frames():
        # Cameras interleaved frame by frame (one open decoder per camera).
        gens = {c: _decode(*sources[c]) for c in cams}
        counts = {c: 0 for c in cams}
        while gens:
            for c in list(gens):
                try:
                    img = next(gens[c])
                except StopIteration:
                    del gens[c]
                    continue
                except av.error.FFmpegError as exc:
                    raise RawEpisodeError(
                        f"{sources[c][0]}: video decode failed at frame {counts[c]} ({exc})"
                    ) from None
                yield c, counts[c], img
                counts[c] += 1

    robot = str(info.get("robot_type") or "")
    epoch = int((root / "meta" / "info.json").stat().st_mtime * 1e9)  # LeRobot stores no wall clock
    return RawEpisode(
        f"{root.name}-{ep.index:06d}",
        f"lerobot-{ep.version}",
        uri,
        robot,
        str(info.get("site", "")),
        task_names[0],
        str(info.get("vendor", "lerobot")),
        epoch,
        None,
        cams,
        arrays,
        clocks=clocks,
        frames=frames,
    )
