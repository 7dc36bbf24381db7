"""Legacy JPEG-folder episodes (layout in robodata.ingest.synth): meta.json, one folder of JPEGs
per camera with device-clock timestamps, state.parquet, events.jsonl and clock_sync.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from robodata.codecs.image import Image, ImageError, decode_jpeg_bytes, image_shape
from robodata.ingest import format_kinds
from robodata.ingest.clock import fit_clock
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError
from robodata.ingest.workers.prefetch import prefetch
from robodata.names import check_name, confine, confine_tree, join_name


def _json(d: Path, name: str):
    path = confine(d, name, field="file", source=d)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RawEpisodeError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RawEpisodeError(f"{path}: invalid JSON: {exc}") from None
    except OSError as exc:
        raise RawEpisodeError(f"{path}: unreadable ({exc})") from None


def _object(doc: object, where: Path) -> dict:
    if not isinstance(doc, dict):
        raise RawEpisodeError(f"{where}: must be a JSON object, not {type(doc).__name__}")
    return doc


def _text(meta: dict, key: str, where: Path) -> str:
    v = meta.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise RawEpisodeError(f"{where}: field {key!r} must be a string, not {type(v).__name__}")
    return v


def _positive_int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 16384 else None


def _camera_info(info: object, where: Path, cam: str) -> tuple[int, int, float]:
    """(height, width, fps) of meta.json cameras.<cam>: integers in 1..16384 and a positive rate."""
    field = f"cameras.{cam}"
    if not isinstance(info, dict):
        raise RawEpisodeError(f"{where}: field {field!r} must be an object, not {type(info).__name__}")
    h, w, fps = _positive_int(info.get("height")), _positive_int(info.get("width")), info.get("fps")
    if h is None or w is None:
        raise RawEpisodeError(f"{where}: field {field!r}: height and width must be integers in 1..16384")
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps) or fps <= 0:
        raise RawEpisodeError(f"{where}: field {field!r}: fps must be a positive number, got {fps!r}")
    return h, w, float(fps)


def _camera(d: Path, cam: str, shape: tuple[int, int, float]) -> tuple[CameraTrack, list[Path]]:
    cd = join_name(d, cam, field="cameras key", source=d / "meta.json")
    files = sorted(cd.glob("*.jpg"))
    ts_path = confine(d, f"{cam}/timestamps.csv", field="file", source=d)
    try:
        lines = ts_path.read_text().split()[1:]
        t = np.array([int(x) for x in lines], dtype=np.int64)
    except (OSError, ValueError, OverflowError, UnicodeDecodeError) as exc:
        raise RawEpisodeError(f"{ts_path}: unreadable ({type(exc).__name__}: {exc})") from None
    if len(t) != len(files):
        raise RawEpisodeError(f"{cd}: {len(files)} JPEG files but {len(t)} timestamps")
    if len(t) == 0:
        raise RawEpisodeError(f"{cd}: no frames")
    h, w, fps = shape
    return CameraTrack(t, h, w, fps), files


def decode_jpeg(path: Path, shape: tuple[int, int]) -> Image:
    """JPEG file -> the decoder's yuvj420p frame (libavcodec), or RGB from PIL for what
    libavcodec refuses; the frame goes to the encoder without an RGB round trip."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RawEpisodeError(f"{path}: unreadable ({exc})") from None
    try:
        img = decode_jpeg_bytes(data)
    except ImageError as exc:
        raise RawEpisodeError(f"{path}: not a decodable JPEG ({exc})") from None
    got = image_shape(img)[:2]
    if got != shape:
        raise RawEpisodeError(f"{path}: frame is {got[1]}x{got[0]}, meta.json says {shape[1]}x{shape[0]}")
    return img


def open_legacy(uri: str, decode_threads: int = 2) -> RawEpisode:
    d = Path(uri)
    if not (d / "_COMPLETE").exists():
        raise RawEpisodeError(f"{d}: no _COMPLETE marker (episode still uploading?)")
    confine_tree(d, field="symlink", source=d)  # nothing in the item may lead a reader out of it
    where = d / "meta.json"
    meta = _object(_json(d, "meta.json"), where)
    episode_id = meta.get("episode_id")
    if episode_id is None or episode_id == "":
        episode_id = check_name(d.name, field="folder name (meta.json has no episode_id)", source=d)
    else:
        episode_id = check_name(episode_id, field="episode_id", source=where)
    try:
        cams_info = _object(meta["cameras"], where)
        st = _object(meta["state"], where)
        names = tuple(st["joint_names"])
        rate_hz = float(st["rate_hz"])
        units = _object(st.get("units") or {}, where)
        start_ns = int(np.datetime64(meta["start_time"].replace("+00:00", ""), "ns").astype(np.int64))
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise RawEpisodeError(f"{where}: missing or bad field ({type(exc).__name__}: {exc})") from None
    if not cams_info:
        raise RawEpisodeError(f"{where}: field 'cameras' names no camera")
    if not all(isinstance(n, str) for n in names) or not math.isfinite(rate_hz) or rate_hz <= 0:
        raise RawEpisodeError(f"{where}: field 'state': joint_names must be strings and rate_hz a positive number")
    success = meta.get("success")
    if success is not None and not isinstance(success, bool):
        raise RawEpisodeError(f"{where}: field 'success' must be true, false or null, not {success!r}")
    text = {k: _text(meta, k, where) for k in ("robot", "site", "task", "vendor")}
    sync = _object(_json(d, "clock_sync.json"), d / "clock_sync.json")
    try:
        clocks = {name: fit_clock(pairs) for name, pairs in sync.items()}
    except (ValueError, TypeError) as exc:
        raise RawEpisodeError(f"{d}/clock_sync.json: {exc}") from None
    cams, files = {}, {}
    for c, info in cams_info.items():
        cams[c], files[c] = _camera(d, c, _camera_info(info, where, c))
    state_path = confine(d, "state.parquet", field="file", source=d)
    try:
        state = pq.read_table(state_path)
        t_state = state.column("t_ns").to_numpy()
        arrays = {}
        for s in ("joint_pos", "joint_cur", "cmd"):
            vals = np.asarray(state.column(s).to_pylist(), dtype=np.float32)
            arrays[s] = ArrayTrack(t_state, vals.reshape(len(t_state), -1), rate_hz, str(units.get(s, "")), names)
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError/KeyError for broken files
        raise RawEpisodeError(f"{state_path}: unreadable ({type(exc).__name__}: {exc})") from None
    events_path = confine(d, "events.jsonl", field="file", source=d)
    try:
        events = [json.loads(x) for x in events_path.read_text().splitlines() if x.strip()]
        ev_t = np.array([int(e["t_ns"]) for e in events], dtype=np.int64)
        labels = [str(e["event"]) for e in events]
    except FileNotFoundError:
        ev_t, labels = np.empty(0, np.int64), []
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise RawEpisodeError(f"{events_path}: {type(exc).__name__}: {exc}") from None
    missing = [k for k in [*cams, "state"] if k not in clocks]
    issues = [f"clock_sync.json has no samples for {missing}; using the device clock as is"] if missing else []

    def frames():
        order = []
        its = {c: iter(range(len(files[c]))) for c in cams}
        while its:  # round-robin across cameras so writer chunks complete together
            for c in list(its):
                i = next(its[c], None)
                if i is None:
                    del its[c]
                else:
                    order.append((c, i))
        jobs = [(lambda c=c, i=i: (c, i, decode_jpeg(files[c][i], (cams[c].height, cams[c].width)))) for c, i in order]
        yield from prefetch(jobs, workers=decode_threads, depth=4 * max(1, decode_threads))

    return RawEpisode(
        episode_id,
        format_kinds.LEGACY_JPEG,
        str(d),
        text["robot"],
        text["site"],
        text["task"],
        text["vendor"],
        start_ns,
        success,
        cams,
        arrays,
        ev_t,
        labels,
        "state",
        clocks,
        issues,
        frames,
    )
