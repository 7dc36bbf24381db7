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
from robodata.container.roles import ACTION_STREAMS, STATE_STREAMS
from robodata.container.rows import check_episode, refuse_uri
from robodata.errors import RobodataError
from robodata.names import check_name, confine

WINDOW_S = 2.0


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


def open_episode(row: dict[str, Any]) -> EpisodeStreams:
    """Open a manifest row's container (footer only), checked to be the row's episode.

    Raises:
        ExportError: the row has no container (`uri` empty), or it is missing or unreadable.
        ContainerError: it is not a valid container (names the file), the row's uri is not one a
            manifest may name, or the container holds another episode (robodata.container.rows).
    """
    uri = row["uri"]
    if not uri:
        raise ExportError("manifest row has an empty uri (no container: a quarantined episode?)")
    refuse_uri(uri)
    try:
        r = EpisodeReader.open(uri, footer_offset=row.get("footer_offset"), footer_length=row.get("footer_length"))
    except OSError as exc:
        raise ExportError(f"{uri}: container cannot be opened ({type(exc).__name__}: {exc})") from None
    check_episode(r, row.get("episode_id"))
    streams = r.meta.streams
    for name in streams:  # stream names become file, folder and feature names in the exports
        check_name(name, field="stream name", source=uri)
    cameras = sorted(s for s, spec in streams.items() if spec.kind == "video")
    arrays = [s for s, spec in streams.items() if spec.kind == "array"]
    roles = r.meta.extra.get("roles") or {}
    state = _role(roles, "state", STATE_STREAMS, arrays, uri)
    action = _role(roles, "action", ACTION_STREAMS, [a for a in arrays if a != state], uri)
    if cameras:
        fps = max(streams[c].rate_hz for c in cameras)  # the reference camera's: the fastest
    elif state:
        fps = streams[state].rate_hz
    else:
        eid = r.meta.episode_id
        raise ExportError(f"episode {eid!r} has neither cameras nor a state stream; its array streams are {arrays}")
    return EpisodeStreams(r, cameras, state, action, fps)


def _role(roles: dict, role: str, names: tuple[str, ...], arrays: list[str], uri: str) -> str | None:
    """The stream the container's roles give `role`, else the first of `names` it holds; None when
    neither names one (the caller refuses rather than guess)."""
    declared = roles.get(role)
    if declared:
        if declared not in arrays:
            raise ExportError(f"{uri}: meta.extra.roles.{role} names stream {declared!r}, which is not an array stream")
        return str(declared)
    return next((s for s in names if s in arrays), None)


def reference_camera(ep: EpisodeStreams) -> str:
    """The camera an export's rows follow: the one with the most frames (ties: the first by name)."""
    counts = {c: 0 for c in ep.cameras}
    for ch in ep.reader.chunks:
        for p in ch.parts:
            if p.stream in counts:
                counts[p.stream] += p.count
    return max(ep.cameras, key=lambda c: counts[c])


def sample_at(t_src: np.ndarray, values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Values of the latest sample at or before each time t (the first sample before it).

    "At" allows a quarter of the source's median sample period (at most 1 ms): streams recorded
    on one clock carry timestamps that differ by rounding (a LeRobot import's float32 parquet
    times against its video's pts), and a frame a few microseconds before its state sample
    belongs with that sample, not with the one a whole period earlier."""
    tol = min(1e-3, 0.25 * float(np.median(np.diff(t_src)))) if len(t_src) > 1 else 0.0
    idx = np.searchsorted(t_src, t + tol, side="right") - 1
    return values[np.clip(idx, 0, len(values) - 1)]


def frames(ep: EpisodeStreams) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """(times in s, {camera: uint8 (T,H,W,3)}) per window: every frame of the reference camera (the
    one with the most frames) exactly once, in order, and each other camera's nearest frame to it (a
    camera that ended earlier, or runs slower, holds its last frame). Without cameras, the state
    stream's samples are the rows ({} frames). An export therefore writes the container's frames,
    never a grid computed from the duration (which drops or repeats the last frame)."""
    if not ep.cameras:
        if ep.state is None:
            raise ExportError(f"episode {ep.reader.meta.episode_id!r} has neither cameras nor a state stream")
        t = arrays(ep)[ep.state][0]
        for i in range(0, len(t), 256):
            yield t[i : i + 256], {}
        return
    ref = reference_camera(ep)
    want = sum(p.count for ch in ep.reader.chunks for p in ch.parts if p.stream == ref)
    streams = ep.reader.meta.streams
    pad = max([1.0 / streams[c].rate_hz for c in ep.cameras if streams[c].rate_hz > 0] or [WINDOW_S])
    held: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # camera -> (time, frame) of its latest frame
    done, t0, end = 0, 0.0, ep.reader.meta.duration_s + WINDOW_S
    while done < want and t0 <= end:
        t1 = t0 + WINDOW_S
        win = ep.reader.read_window(max(0.0, t0 - pad), t1 + pad, streams=ep.cameras)
        keep = (win[ref].t >= t0) & (win[ref].t < t1)
        grid = win[ref].t[keep]
        if len(grid):
            out = {ref: win[ref].data[keep]}
            for cam in ep.cameras:
                if cam != ref:
                    out[cam] = _nearest(ep, cam, win[cam].t, win[cam].data, grid, held)
            done += len(grid)
            yield grid, out
        t0 = t1
    if done != want:
        eid = ep.reader.meta.episode_id
        raise ExportError(f"episode {eid!r}: camera {ref!r} read {done} frames of the {want} its index holds")


def _nearest(ep: EpisodeStreams, cam: str, t: np.ndarray, data: np.ndarray, grid: np.ndarray, held: dict) -> np.ndarray:
    """`cam`'s nearest frame at each grid time; the previous window's last frame stands in before
    this window's first."""
    if cam in held and (len(t) == 0 or held[cam][0][0] < t[0]):
        t = np.concatenate([held[cam][0], t])
        data = np.concatenate([held[cam][1], data])
    if len(t) == 0:
        raise ExportError(f"episode {ep.reader.meta.episode_id!r}: camera {cam!r} has no frames near {grid[0]:.3f} s")
    i = np.clip(np.searchsorted(t, grid), 1, len(t) - 1) if len(t) > 1 else np.zeros(len(grid), int)
    if len(t) > 1:
        i = np.where(np.abs(t[i - 1] - grid) <= np.abs(t[i] - grid), i - 1, i)
    held[cam] = (t[-1:], data[-1:])
    return data[i]


def arrays(ep: EpisodeStreams) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The whole state/action streams (low-rate, small): {name: (t seconds, values)}."""
    names = [s for s in (ep.state, ep.action) if s]
    if not names:
        return {}
    win = ep.reader.read_window(0.0, ep.reader.meta.duration_s + 1.0, streams=names)
    return {s: (win[s].t, win[s].data.reshape(len(win[s].t), -1).astype(np.float32)) for s in names}


def empty_destination(out: str | Path) -> Path:
    """`out`, refused (ExportError) unless it is absent or an empty folder: checked before any
    episode is opened, and again when the export is renamed into place."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty directory; export into a new or empty one")
    return out


@contextlib.contextmanager
def staging(out: str | Path) -> Iterator[Path]:
    """A temporary folder next to `out` to export into, renamed to `out` on success and removed on
    any failure, so a failed export leaves nothing behind. `out` must be absent or empty."""
    out = empty_destination(out)
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
