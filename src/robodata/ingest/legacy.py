"""Import a legacy JPEG-folder episode (see robodata.ingest.synth) into a container.

Clock alignment: each device's clock_sync samples ([device_ns, host_ns] pairs) are fit with a
least-squares line (offset + drift), and every timestamp is mapped onto the host timeline,
then shifted so the episode starts at t=0. The residual of that fit is the alignment error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

from robodata.container import EpisodeMeta, EpisodeWriter, Layout, StreamSpec
from robodata.container.meta import default_layout
from robodata.errors import RobodataError


class RawEpisodeError(RobodataError):
    """A raw episode cannot be imported; the message says what is wrong with which file."""


@dataclass
class ClockFit:
    drift: float          # host = drift * device + offset
    offset: float
    residual_ns: float    # RMS of the fit: alignment error of this stream

    def apply(self, t: np.ndarray) -> np.ndarray:
        return np.round(self.drift * t.astype(np.float64) + self.offset).astype(np.int64)


def fit_clock(pairs: list[list[int]]) -> ClockFit:
    a = np.asarray(pairs, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2 or len(a) < 2:
        raise ValueError("clock sync needs at least two [device_ns, host_ns] pairs")
    dev, host = a[:, 0], a[:, 1]
    d0 = dev.mean()
    A = np.stack([dev - d0, np.ones_like(dev)], axis=1)
    (drift, b), *_ = np.linalg.lstsq(A, host, rcond=None)
    resid = host - (drift * (dev - d0) + b)
    return ClockFit(float(drift), float(b - drift * d0), float(np.sqrt(np.mean(resid**2))))


@dataclass
class ImportResult:
    episode_id: str
    path: str
    frames: dict[str, int]
    state_steps: int
    duration_s: float
    alignment_error_ns: dict[str, float]
    bytes_written: int
    layout_version: str
    footer_offset: int = 0
    footer_length: int = 0


def read_legacy_meta(episode_dir: Path) -> dict:
    try:
        return json.loads((episode_dir / "meta.json").read_text())
    except FileNotFoundError:
        raise RawEpisodeError(f"{episode_dir}: meta.json missing") from None
    except json.JSONDecodeError as exc:
        raise RawEpisodeError(f"{episode_dir}/meta.json: invalid JSON: {exc}") from None


def _camera_frames(episode_dir: Path, cam: str) -> tuple[list[Path], np.ndarray]:
    cd = episode_dir / cam
    files = sorted(cd.glob("*.jpg"))
    try:
        lines = (cd / "timestamps.csv").read_text().split()[1:]
        t = np.array([int(x) for x in lines], dtype=np.int64)
    except (FileNotFoundError, ValueError) as exc:
        raise RawEpisodeError(f"{cd}/timestamps.csv: unreadable ({exc})") from None
    if len(t) != len(files):
        raise RawEpisodeError(f"{cd}: {len(files)} JPEG files but {len(t)} timestamps")
    return files, t


def import_legacy(episode_dir: str | os.PathLike[str], out_path: str | os.PathLike[str],
                  layout: Layout | None = None) -> ImportResult:
    """Convert one legacy episode directory into a container at out_path (written atomically)."""
    d = Path(episode_dir)
    if not (d / "_COMPLETE").exists():
        raise RawEpisodeError(f"{d}: no _COMPLETE marker (episode still uploading?)")
    meta_raw = read_legacy_meta(d)
    cams = list(meta_raw["cameras"])
    try:
        sync = json.loads((d / "clock_sync.json").read_text())
        fits = {name: fit_clock(pairs) for name, pairs in sync.items()}
    except (FileNotFoundError, json.JSONDecodeError, ValueError) as exc:
        raise RawEpisodeError(f"{d}/clock_sync.json: {exc}") from None
    state = pq.read_table(d / "state.parquet")
    state_t = fits["state"].apply(state.column("t_ns").to_numpy())
    frames = {c: _camera_frames(d, c) for c in cams}
    cam_t = {c: fits[c].apply(t) for c, (_, t) in frames.items()}
    events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines() if line.strip()]
    ev_t = fits["state"].apply(np.array([e["t_ns"] for e in events], dtype=np.int64)) if events else np.empty(0, np.int64)
    t0 = min([int(state_t.min())] + [int(t.min()) for t in cam_t.values()])
    st = meta_raw["state"]
    names = tuple(st["joint_names"])
    streams = {c: StreamSpec(c, "video", float(meta_raw["cameras"][c]["fps"]),
                             (int(meta_raw["cameras"][c]["height"]), int(meta_raw["cameras"][c]["width"]), 3)) for c in cams}
    for s in ("joint_pos", "joint_cur", "cmd"):
        streams[s] = StreamSpec(s, "array", float(st["rate_hz"]), (len(names),), units=st["units"].get(s, ""), names=names)
    streams["events"] = StreamSpec("events", "events")
    start = datetime.fromisoformat(meta_raw["start_time"])
    meta = EpisodeMeta(meta_raw["episode_id"], meta_raw["robot"], meta_raw["site"], meta_raw["task"],
                       int(start.timestamp() * 1e9) + t0, streams, vendor=meta_raw.get("vendor", ""),
                       extra={"success": bool(meta_raw.get("success", False)), "source": "legacy-jpeg"})
    layout = layout or default_layout(cams)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".partial")
    try:
        _write(tmp, meta, layout, cams, frames, cam_t, t0, state, state_t, events, ev_t)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out_path)
    from robodata.container import EpisodeReader

    r = EpisodeReader.open(out_path)
    return ImportResult(meta.episode_id, str(out_path), {c: len(frames[c][0]) for c in cams}, len(state_t),
                        r.meta.duration_s, {k: f.residual_ns for k, f in fits.items()}, out_path.stat().st_size,
                        layout.version, r.footer_offset, r.footer_length)


def _write(tmp, meta, layout, cams, frames, cam_t, t0, state, state_t, events, ev_t) -> None:
    with EpisodeWriter(tmp, meta, layout) as w:
        # Interleave cameras frame by frame so chunks flush as soon as they complete.
        iters = {c: iter(zip(frames[c][0], cam_t[c] - t0)) for c in cams}
        while iters:
            for c in list(iters):
                item = next(iters[c], None)
                if item is None:
                    del iters[c]
                    continue
                path, t = item
                try:
                    with Image.open(path) as im:
                        rgb = np.asarray(im.convert("RGB"))
                except Exception as exc:  # PIL raises many types for broken files
                    raise RawEpisodeError(f"{path}: not a decodable JPEG ({exc})") from None
                w.write_frame(c, rgb, int(t))
        for s in ("joint_pos", "joint_cur", "cmd"):
            vals = np.asarray(state.column(s).to_pylist(), dtype=np.float32)
            w.write_array(s, state_t - t0, vals)
        if events:
            w.write_events("events", ev_t - t0, [e["event"] for e in events])
