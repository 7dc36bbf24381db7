"""Read manifest episodes as frame-aligned samples (shared by the exporters).

Streams are read in windows of WINDOW_S seconds, so memory stays bounded by one window
of decoded frames whatever the episode length.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.names import check_name, confine

WINDOW_S = 2.0
STATE_STREAMS = ("joint_pos", "state", "qpos")
ACTION_STREAMS = ("cmd", "action", "joint_cmd")


class ExportError(RobodataError):
    """An episode cannot be exported (missing streams, unreadable container)."""


@dataclass
class EpisodeStreams:
    reader: EpisodeReader
    cameras: list[str]
    state: str | None
    action: str | None
    fps: float


def out_path(out: str | Path, rel: str, field: str) -> Path:
    """Where an exporter writes `rel`: confined to its output folder (robodata.names.confine:
    resolved, symlinks followed), UnsafeNameError otherwise. Every exporter write goes through it."""
    return confine(out, rel, field=field, source=f"export to {out}")


def check_ids(rows: list[dict[str, Any]], manifest: str = "manifest") -> list[str]:
    """The rows' episode ids, each a safe name (it names an output file) and unique; checked
    before anything is written, so a bad manifest leaves no partial export."""
    ids: list[str] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        eid = check_name(row.get("episode_id"), field=f"episode_id (row {i})", source=manifest)
        if eid in seen:
            raise ExportError(f"{manifest}: episode_id {eid!r} appears twice; an export writes each episode once")
        seen.add(eid)
        ids.append(eid)
    return ids


def open_episode(uri: str, footer_offset: int | None = None, footer_length: int | None = None) -> EpisodeStreams:
    """Open a manifest row's container (footer only).

    Raises:
        ExportError: the row has no container (`uri` empty), or it is missing or unreadable.
        ContainerError: it is not a valid container (names the file).
    """
    if not uri:
        raise ExportError("manifest row has an empty uri (no container: a quarantined episode?)")
    try:
        r = EpisodeReader.open(uri, footer_offset=footer_offset, footer_length=footer_length)
    except OSError as exc:
        raise ExportError(f"{uri}: container cannot be opened ({type(exc).__name__}: {exc})") from None
    streams = r.meta.streams
    for name in streams:  # stream names become file, folder and feature names in the exports
        check_name(name, field="stream name", source=uri)
    cameras = sorted(s for s, spec in streams.items() if spec.kind == "video")
    arrays = [s for s, spec in streams.items() if spec.kind == "array"]
    state = next((s for s in STATE_STREAMS if s in arrays), arrays[0] if arrays else None)
    action = next((s for s in ACTION_STREAMS if s in arrays and s != state), None)
    if cameras:
        fps = streams[cameras[0]].rate_hz
    elif state:
        fps = streams[state].rate_hz
    else:
        raise ExportError(f"episode {r.meta.episode_id!r} has neither cameras nor array streams")
    return EpisodeStreams(r, cameras, state, action, fps)


def sample_at(t_src: np.ndarray, values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Values of the latest sample at or before each time t (the first sample before it).

    "At" allows a quarter of the source's median sample period (at most 1 ms): streams recorded
    on one clock carry timestamps that differ by rounding (a LeRobot import's float32 parquet
    times against its video's pts), and a frame a few microseconds before its state sample
    belongs with that sample, not with the one a whole period earlier."""
    tol = min(1e-3, 0.25 * float(np.median(np.diff(t_src)))) if len(t_src) > 1 else 0.0
    idx = np.searchsorted(t_src, t + tol, side="right") - 1
    return values[np.clip(idx, 0, len(values) - 1)]


def frames(ep: EpisodeStreams, grid_fps: float | None = None) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """(frame times in s, {camera: uint8 (T,H,W,3)}) per window, on the first camera's clock, or
    with `grid_fps` on the nominal grid k / grid_fps (each camera's nearest frame: sample-and-hold)."""
    duration = ep.reader.meta.duration_s
    if not ep.cameras:
        fps = grid_fps or ep.fps
        n = int(np.floor(duration * fps)) + 1
        yield np.arange(n) / fps, {}
        return
    if grid_fps:
        yield from _grid_frames(ep, grid_fps, duration)
        return
    t0 = 0.0
    while t0 <= duration:
        t1 = t0 + WINDOW_S
        win = ep.reader.read_window(t0, t1, streams=ep.cameras)
        clock = win[ep.cameras[0]].t
        keep = (clock >= t0) & (clock < t1)
        out = {}
        n = int(keep.sum())
        for cam in ep.cameras:
            w = win[cam]
            k = (w.t >= t0) & (w.t < t1)
            data = w.data[k]
            n = min(n, len(data))
            out[cam] = data
        if n:
            yield clock[keep][:n], {c: d[:n] for c, d in out.items()}
        t0 = t1


def _grid_frames(ep: EpisodeStreams, fps: float, duration: float) -> Iterator[tuple[np.ndarray, dict]]:
    """Each camera's nearest frame at every grid time. A window is padded by the slowest camera's
    period, and a grid time past a camera's last frame holds that frame (a camera at a lower rate,
    or one that stopped a frame early, ends before `duration`)."""
    n_total = int(np.floor(duration * fps + 1e-6)) + 1
    step = max(1, int(WINDOW_S * fps))
    streams = ep.reader.meta.streams
    pad = max([1.0 / fps, *(1.0 / streams[c].rate_hz for c in ep.cameras if streams[c].rate_hz > 0)])
    held: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # camera -> (time, frame) of its latest frame
    for k0 in range(0, n_total, step):
        grid = np.arange(k0, min(n_total, k0 + step)) / fps
        win = ep.reader.read_window(max(0.0, grid[0] - pad), grid[-1] + pad, streams=ep.cameras)
        out = {}
        for cam in ep.cameras:
            t, data = win[cam].t, win[cam].data
            if cam in held:  # the previous window's last frame stands in before this window's first
                t = np.concatenate([held[cam][0], t])
                data = np.concatenate([held[cam][1], data])
            if len(t) == 0:
                eid = ep.reader.meta.episode_id
                raise ExportError(f"episode {eid!r}: camera {cam!r} has no frames near {grid[0]:.3f} s")
            i = np.clip(np.searchsorted(t, grid), 1, len(t) - 1) if len(t) > 1 else np.zeros(len(grid), int)
            if len(t) > 1:
                i = np.where(np.abs(t[i - 1] - grid) <= np.abs(t[i] - grid), i - 1, i)
            out[cam] = data[i]
            held[cam] = (t[-1:], data[-1:])
        yield grid, out


def arrays(ep: EpisodeStreams) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The whole state/action streams (low-rate, small): {name: (t seconds, values)}."""
    names = [s for s in (ep.state, ep.action) if s]
    if not names:
        return {}
    win = ep.reader.read_window(0.0, ep.reader.meta.duration_s + 1.0, streams=names)
    return {s: (win[s].t, win[s].data.reshape(len(win[s].t), -1).astype(np.float32)) for s in names}


@contextlib.contextmanager
def staging(out: str | Path) -> Iterator[Path]:
    """A temporary folder next to `out` to export into, renamed to `out` on success and removed on
    any failure, so a failed export leaves nothing behind. `out` must be absent or empty."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty directory; export into a new or empty one")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
