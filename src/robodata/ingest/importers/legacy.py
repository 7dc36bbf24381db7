"""Legacy JPEG-folder episodes (layout in robodata.ingest.synth): meta.json, one folder of JPEGs
per camera with device-clock timestamps, state.parquet, events.jsonl and clock_sync.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from robodata.codecs.image import Image, ImageError, decode_jpeg_bytes, image_shape
from robodata.ingest.clock import fit_clock
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError
from robodata.ingest.workers.prefetch import prefetch


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RawEpisodeError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RawEpisodeError(f"{path}: invalid JSON: {exc}") from None


def _camera(d: Path, cam: str, info: dict) -> tuple[CameraTrack, list[Path]]:
    cd = d / cam
    files = sorted(cd.glob("*.jpg"))
    try:
        lines = (cd / "timestamps.csv").read_text().split()[1:]
        t = np.array([int(x) for x in lines], dtype=np.int64)
    except (FileNotFoundError, ValueError) as exc:
        raise RawEpisodeError(f"{cd}/timestamps.csv: unreadable ({exc})") from None
    if len(t) != len(files):
        raise RawEpisodeError(f"{cd}: {len(files)} JPEG files but {len(t)} timestamps")
    if len(t) == 0:
        raise RawEpisodeError(f"{cd}: no frames")
    return CameraTrack(t, int(info["height"]), int(info["width"]), float(info["fps"])), files


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
    meta = _json(d / "meta.json")
    try:
        cams_info = dict(meta["cameras"])
        st = meta["state"]
        names = tuple(st["joint_names"])
        start_ns = int(np.datetime64(meta["start_time"].replace("+00:00", ""), "ns").astype(np.int64))
    except (KeyError, TypeError, ValueError) as exc:
        raise RawEpisodeError(f"{d}/meta.json: missing or bad field ({exc})") from None
    sync = _json(d / "clock_sync.json")
    try:
        clocks = {name: fit_clock(pairs) for name, pairs in sync.items()}
    except (ValueError, TypeError) as exc:
        raise RawEpisodeError(f"{d}/clock_sync.json: {exc}") from None
    cams, files = {}, {}
    for c, info in cams_info.items():
        cams[c], files[c] = _camera(d, c, info)
    try:
        state = pq.read_table(d / "state.parquet")
        t_state = state.column("t_ns").to_numpy()
        arrays = {}
        for s in ("joint_pos", "joint_cur", "cmd"):
            vals = np.asarray(state.column(s).to_pylist(), dtype=np.float32)
            arrays[s] = ArrayTrack(
                t_state, vals.reshape(len(t_state), -1), float(st["rate_hz"]), st.get("units", {}).get(s, ""), names
            )
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError/KeyError for broken files
        raise RawEpisodeError(f"{d}/state.parquet: unreadable ({type(exc).__name__}: {exc})") from None
    try:
        events = [json.loads(x) for x in (d / "events.jsonl").read_text().splitlines() if x.strip()]
        ev_t = np.array([int(e["t_ns"]) for e in events], dtype=np.int64)
        labels = [str(e["event"]) for e in events]
    except FileNotFoundError:
        ev_t, labels = np.empty(0, np.int64), []
    except (json.JSONDecodeError, KeyError, ValueError) as exc:
        raise RawEpisodeError(f"{d}/events.jsonl: {exc}") from None
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
        str(meta.get("episode_id") or d.name),
        "legacy-jpeg",
        str(d),
        str(meta.get("robot", "")),
        str(meta.get("site", "")),
        str(meta.get("task", "")),
        str(meta.get("vendor", "")),
        start_ns,
        meta.get("success"),
        cams,
        arrays,
        ev_t,
        labels,
        "state",
        clocks,
        issues,
        frames,
    )
