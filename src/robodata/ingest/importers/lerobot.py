"""LeRobot datasets (codebase v2.1 and v3.0) from a local directory: parquet + mp4 (H.264 / AV1).

v2.1: one parquet and one mp4 per camera per episode; meta/episodes.jsonl, meta/tasks.jsonl.
v3.0: many episodes per parquet / mp4 file; meta/episodes/*/*.parquet gives each episode's
row range and per-camera [from_timestamp, to_timestamp) inside its video file; meta/tasks.parquet.
Frame times come from the video packets (demuxed, not decoded); the parquet `timestamp`
column is the state clock. Their mismatch is the camera's alignment error.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robodata.codecs.demux import SourceVideo
from robodata.errors import RobodataError
from robodata.ingest import format_kinds
from robodata.ingest.clock import ClockFit, fit_offset
from robodata.ingest.importers.lerobot_meta import LeRobotEpisode, dataset_episodes
from robodata.ingest.importers.lerobot_meta import dataset_info as _info
from robodata.ingest.importers.lerobot_video import decode, episode_packets, episode_video
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError
from robodata.names import check_name, confine

INDEX_COLUMNS = {"timestamp", "frame_index", "episode_index", "index", "task_index"}
ARRAY_NAMES = {
    "observation.state": "joint_pos",
    "state": "joint_pos",
    "action": "cmd",
    "actions": "cmd",
    "observation.effort": "joint_cur",
    "observation.velocity": "joint_vel",
}
# feature keys whose role the dataset declares by name (the first present wins each role)
ROLE_KEYS = {"state": ("observation.state", "state"), "action": ("action", "actions")}
SMALL_PARQUET = 256 << 10  # bytes: a data parquet this small is read whole, in one read
RADIAN_SUFFIXES = ("_rad", ".rad")  # names that say their values are radians (e.g. `joint_1_rad`)


def _template(info: dict, key: str, root: Path) -> str:
    t = info.get(key)
    if not isinstance(t, str):
        raise RawEpisodeError(f"{root}/meta/info.json: field {key!r} must be a path template string, not {t!r}")
    return t


def _resolve(root: Path, template: str, key: str, **values) -> Path:
    """A path template filled in and confined to the dataset root (resolved, symlinks followed)."""
    try:
        rel = template.format(**values)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        why = f"bad template ({type(exc).__name__}: {exc})"
        raise RawEpisodeError(f"{root}/meta/info.json: field {key!r}: {why}") from None
    return confine(root, rel, field=key, source=root / "meta" / "info.json")


def _video_path(root: Path, info: dict, ep: LeRobotEpisode, key: str) -> tuple[Path, float, float]:
    template = _template(info, "video_path", root)
    if ep.version == "v2.1":
        chunk = ep.index // int(info.get("chunks_size", 1000))
        p = _resolve(root, template, "video_path", episode_chunk=chunk, video_key=key, episode_index=ep.index)
        return p, 0.0, float("inf")
    r = ep.row
    try:
        chunk, file = int(r[f"videos/{key}/chunk_index"]), int(r[f"videos/{key}/file_index"])
        t_from, t_to = float(r[f"videos/{key}/from_timestamp"]), float(r[f"videos/{key}/to_timestamp"])
    except (KeyError, TypeError, ValueError) as exc:
        why = f"episode {ep.index} has no usable row for camera {key!r} ({type(exc).__name__}: {exc})"
        raise RawEpisodeError(f"{root}/meta/episodes: {why}") from None
    return _resolve(root, template, "video_path", video_key=key, chunk_index=chunk, file_index=file), t_from, t_to


def _data_path(root: Path, info: dict, ep: LeRobotEpisode) -> Path:
    template = _template(info, "data_path", root)
    if ep.version == "v2.1":
        chunk = ep.index // int(info.get("chunks_size", 1000))
        return _resolve(root, template, "data_path", episode_chunk=chunk, episode_index=ep.index)
    try:
        chunk, file = int(ep.row["data/chunk_index"]), int(ep.row["data/file_index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RawEpisodeError(f"{root}/meta/episodes: episode {ep.index}: bad data file index ({exc})") from None
    return _resolve(root, template, "data_path", chunk_index=chunk, file_index=file)


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
            if isinstance(ft, dict) and ft.get("dtype") == "video"
        ]
    except (KeyError, ValueError, TypeError) as exc:
        raise RawEpisodeError(f"{root}/meta: bad path template or episode row ({type(exc).__name__}: {exc})") from None
    base = root.resolve()
    return sorted({str(p.relative_to(base)) for p in paths})


def _data(root: Path, info: dict, ep: LeRobotEpisode):
    path = _data_path(root, info, ep)
    if not path.is_file():  # pyarrow would read a folder as a dataset of every file under it
        raise RawEpisodeError(f"{path}: data_path names no file for episode {ep.index}")
    # the row groups whose statistics may hold the episode (a v3.0 file holds many episodes); a
    # small file is read whole, once (pyarrow's footer read alone takes up to its last 64 KiB)
    small = path.stat().st_size <= SMALL_PARQUET
    try:
        src = pa.BufferReader(path.read_bytes()) if small else path
        t = pq.read_table(src, filters=[("episode_index", "=", ep.index)])
    except Exception as exc:
        raise RawEpisodeError(f"{path}: unreadable parquet ({type(exc).__name__}: {exc})") from None
    t = t.filter(pc.equal(t.column("episode_index"), ep.index))
    if t.num_rows == 0:
        raise RawEpisodeError(f"{path}: no rows for episode {ep.index}")
    return t


def _names(ft: dict) -> tuple[str, ...]:
    """A feature's column names: a list of strings, LeRobot's nested `[[...]]` (one list of names
    wrapped in another) or `{"motors": [...]}`; () when it names none."""
    names = ft.get("names")
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, list) and len(names) == 1 and isinstance(names[0], list):
        names = names[0]
    if isinstance(names, list) and names and all(isinstance(x, str) for x in names):
        return tuple(names)
    return ()


def _units(ft: dict, names: tuple[str, ...]) -> str:
    """The units a feature declares: its `units` field, or "rad" when every name says radians."""
    if isinstance(ft.get("units"), str):
        return ft["units"]
    if names and all(n.endswith(RADIAN_SUFFIXES) for n in names):
        return "rad"
    return ""


def _image_features(feats: dict, table, where: Path, cams: dict, t_state: np.ndarray, fps: float) -> dict:
    """`dtype: image` features (frames stored in the parquet: struct<bytes, path> or bytes) as
    cameras on the state clock; returns camera -> frame generator factory."""
    from robodata.ingest.importers.fixed_rate import decode_encoded

    out = {}
    for key, ft in feats.items():
        if ft.get("dtype") != "image":
            continue
        name = check_name(key.rsplit(".", 1)[-1], field=f"features key {key!r} (camera name)", source=where)
        if name in cams:
            raise RawEpisodeError(f"{where}: two camera features end in camera name {name!r}")
        if key not in table.column_names:
            raise RawEpisodeError(f"{where}: image feature {key!r} has no column in the episode's parquet")
        col = table.column(key)
        h, w = int(ft["shape"][0]), int(ft["shape"][1])
        if not (0 < h <= 16384 and 0 < w <= 16384):
            raise RawEpisodeError(f"{where}: features.{key}: bad shape {ft['shape']!r}")
        cams[name] = CameraTrack(t_state, h, w, fps, clock="state")

        def gen(col=col, key=key):
            for i, v in enumerate(col.to_pylist()):
                data = v.get("bytes") if isinstance(v, dict) else v
                if not data:
                    raise RawEpisodeError(f"{where}: image feature {key!r} row {i} holds no image bytes")
                yield decode_encoded(data, f"{where} feature {key!r} row {i}")

        out[name] = gen
    return out


def open_lerobot(uri: str) -> RawEpisode:
    try:
        return _open_lerobot(uri)
    except RobodataError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise RawEpisodeError(f"{uri}: malformed dataset metadata ({type(exc).__name__}: {exc})") from None


def _declared_rate(value: object) -> float:
    """A declared fps as a float; 0.0 when absent, not a number, not finite or not positive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    v = float(value)
    return v if np.isfinite(v) and v > 0 else 0.0


def _open_lerobot(uri: str) -> RawEpisode:
    root_s, _, idx_s = uri.partition("#")
    root = Path(root_s)
    info = _info(root)
    where = root / "meta" / "info.json"
    eps = {e.index: e for e in dataset_episodes(root_s)}
    try:
        ep = eps[int(idx_s or 0)]
    except (KeyError, ValueError):
        raise RawEpisodeError(f"{uri}: no such episode (dataset has {len(eps)})") from None
    fps = _declared_rate(info.get("fps"))  # 0.0: none; alignment measures it and QC judges it
    table = _data(root, info, ep)
    ts = np.asarray(table.column("timestamp").to_numpy(), np.float64)
    t_state = np.round(ts * 1e9).astype(np.int64)
    feats = info.get("features", {})
    arrays, roles = _arrays(feats, table, t_state, fps, where)
    cams, clocks, videos, issues = {}, {}, {}, []
    for key, ft in feats.items():
        if ft.get("dtype") != "video":
            continue
        name = check_name(key.rsplit(".", 1)[-1], field=f"features key {key!r} (camera name)", source=where)
        if name in cams:
            raise RawEpisodeError(f"{where}: two video features end in camera name {name!r}")
        path, t_from, t_to = _video_path(root, info, ep, key)
        video = episode_video(root, path, t_from, t_to, key, ts - ts[0])
        if not video.pts:
            raise RawEpisodeError(f"{path}: no frames in [{t_from}, {t_to}) for episode {ep.index}")
        if len(video.pts) != len(t_state):
            issues.append(
                f"frames_state_mismatch:{name}: {len(video.pts)} frames in {path.name} "
                f"[{t_from:g}, {t_to:g}] for {len(t_state)} parquet rows of episode {ep.index}"
            )
        t_cam = np.round(video.times_s * 1e9).astype(np.int64)
        h, w = int(ft["shape"][0]), int(ft["shape"][1])
        cam_fps = _declared_rate(ft.get("info", {}).get("video.fps", fps))
        if not (0 < h <= 16384 and 0 < w <= 16384):
            raise RawEpisodeError(f"{where}: features.{key}: bad shape {ft['shape']!r}")
        cams[name] = CameraTrack(t_cam, h, w, cam_fps)
        n = min(len(t_cam), len(t_state))
        clocks[name] = fit_offset(t_cam[:n], t_state[:n]) if n >= 2 else ClockFit(1.0, 0.0, 0.0, 0)
        videos[name] = video
    images = _image_features(feats, table, where, cams, t_state, fps)
    task_names = ep.tasks or [""]

    def frames(skip: frozenset[str] | set[str] = frozenset()):
        # Cameras interleaved frame by frame (one open decoder per camera; image features from the
        # parquet); cameras in `skip` (stream-copied) are never decoded.
        gens = {c: decode(videos[c]) for c in videos if c not in skip}
        gens.update({c: g() for c, g in images.items() if c not in skip})
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
                        f"{videos[c].path}: video decode failed at frame {counts[c]} ({exc})"
                    ) from None
                yield c, counts[c], img
                counts[c] += 1

    def sources(cam: str) -> SourceVideo:
        if cam not in videos:
            raise RawEpisodeError(f"{where}: camera {cam!r} is an image feature (frames in the parquet, no bitstream)")
        return episode_packets(videos[cam])

    robot = str(info.get("robot_type") or "")
    epoch = int(where.stat().st_mtime * 1e9)  # LeRobot stores no wall clock
    episode_id = check_name(f"{root.name}-{ep.index:06d}", field="dataset folder name + episode_index", source=root)
    return RawEpisode(
        episode_id,
        format_kinds.versioned(format_kinds.LEROBOT, ep.version),
        uri,
        robot,
        str(info.get("site", "")),
        task_names[0],
        str(info.get("vendor", format_kinds.LEROBOT)),  # no vendor named: the format it came in
        epoch,
        None,
        cams,
        arrays,
        clocks=clocks,
        frames=frames,
        issues=issues,
        robot_type=robot,
        source_dataset=root.name,
        language=task_names[0],
        roles=roles,
        video_sources=sources,
    )


def _arrays(feats: dict, table, t_state: np.ndarray, fps: float, where: Path) -> tuple[dict, dict[str, str]]:
    """Numeric features as array streams, and the roles the dataset declares by feature name
    (`observation.state` / `state`, `action` / `actions`): never inferred from values."""
    arrays: dict[str, ArrayTrack] = {}
    streams: dict[str, str] = {}  # feature key -> stream
    for key, ft in feats.items():
        if ft.get("dtype") in ("video", "image", "string") or key in INDEX_COLUMNS or key not in table.column_names:
            continue
        vals = np.asarray(table.column(key).to_pylist(), np.float32).reshape(table.num_rows, -1)
        names = _names(ft)
        stream = ARRAY_NAMES.get(key, key.replace(".", "_"))
        if stream in arrays:  # `action` and `actions` both there: the second keeps its own name
            stream = key.replace(".", "_")
        stream = check_name(stream, field=f"features key {key!r}", source=where)
        arrays[stream] = ArrayTrack(t_state, vals, fps, _units(ft, names), names, "state")
        streams[key] = stream
    roles = {}
    for role, keys in ROLE_KEYS.items():
        key = next((k for k in keys if k in streams), None)
        if key is not None:
            roles[role] = streams[key]
    return arrays, roles
