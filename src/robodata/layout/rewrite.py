"""Re-encode / re-chunk one container into another layout, verify it, publish it atomically.

The new object is written under a temporary name beside its destination, opened again and
read in full (every stream's sample count and timestamps, array values and event labels
equal to the source's, sampled frames within a PSNR floor), and only then renamed into
place: a reader sees either no object or a complete, verified one. The source is never
touched, so the old layout stays readable.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa

from robodata.codecs.ipc import DecodeBudget
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout
from robodata.errors import ContainerError

PSNR_SAMPLES = 8  # frames per camera kept from the source to compare against the new encode


@dataclass
class RewriteResult:
    uri: str
    layout_version: str
    size_bytes: int
    footer_offset: int
    footer_length: int
    frames: dict[str, int] = field(default_factory=dict)
    min_psnr_db: float = 99.0


def _lowdim(reader: EpisodeReader, stream: str) -> pa.Table:
    """Every part of a non-video stream as one table (exact ns timestamps, payloads kept), each
    part checksummed and verified by the reader, all of them under one read's decode cap."""
    budget = DecodeBudget(reader.config.max_decode_bytes, "ReaderConfig.max_decode_bytes")
    everything = (-(2**63), 2**63 - 1)
    tables = [reader.part_table(c, p, blob, budget) for c, p, blob in reader.fetch_parts({stream: everything})]
    if not tables:
        return pa.table({"t_ns": pa.array([], pa.int64())})
    return pa.concat_tables(tables)


def _video_slices(reader: EpisodeReader, cams: list[str]) -> list[tuple[float, float]]:
    """Time slices along the source's camera chunks (each decodes from its own keyframe)."""
    starts = sorted({c.t_start for c in reader.chunks if any(p.stream in cams for p in c.parts)})
    end = max((c.t_end for c in reader.chunks if any(p.stream in cams for p in c.parts)), default=0)
    bounds = starts + [end + 1]
    return [(bounds[i] / 1e9, (bounds[i + 1] - 1) / 1e9) for i in range(len(starts))]


def _frames(reader: EpisodeReader, cams: list[str]) -> Iterator[tuple[str, np.ndarray, int]]:
    """(camera, rgb, t_ns) for every frame of the cameras, time-ordered, one slice in memory."""
    last = {c: -1 for c in cams}
    for t0, t1 in _video_slices(reader, cams):
        win = reader.read_window(t0, t1, cams)
        items = []
        for c in cams:
            for rgb, t in zip(win[c].data, win[c].t, strict=True):
                t_ns = int(round(t * 1e9))
                if t_ns > last[c]:
                    items.append((t_ns, c, rgb))
                    last[c] = t_ns
        items.sort(key=lambda x: (x[0], cams.index(x[1])))
        for t_ns, c, rgb in items:
            yield c, rgb, t_ns


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2))
    return 99.0 if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def _write(
    reader: EpisodeReader, layout: Layout, f: Any
) -> tuple[dict[str, list[int]], dict[str, dict[int, np.ndarray]]]:
    m = reader.meta
    meta = EpisodeMeta(
        m.episode_id,
        m.robot,
        m.site,
        m.task,
        m.start_time_ns,
        dict(m.streams),
        m.vendor,
        0.0,
        {**m.extra, "relayout_from": reader.layout_version},
    )
    cams = [s for s, sp in m.streams.items() if sp.kind == "video"]
    times: dict[str, list[int]] = {c: [] for c in cams}
    probes: dict[str, dict[int, np.ndarray]] = {c: {} for c in cams}
    every = {c: max(1, int(m.duration_s * m.streams[c].rate_hz) // PSNR_SAMPLES) for c in cams}
    with EpisodeWriter(f, meta, layout) as w:
        for c, rgb, t_ns in _frames(reader, cams):
            if len(times[c]) % every[c] == 0 and len(probes[c]) < PSNR_SAMPLES:
                probes[c][t_ns] = rgb.copy()
            times[c].append(t_ns)
            w.write_frame(c, rgb, t_ns)
        for s, sp in m.streams.items():
            if sp.kind == "video":
                continue
            tab = _lowdim(reader, s)
            if tab.num_rows == 0:
                continue
            t = tab.column("t_ns").to_numpy()
            if sp.kind == "array":
                flat = tab.column("value").combine_chunks().flatten().to_numpy(zero_copy_only=False)
                w.write_array(s, t, flat.astype(sp.dtype, copy=False).reshape((len(t), *sp.shape)))
            else:
                w.write_events(
                    s, t, tab.column("label").to_pylist(), [json.loads(x) for x in tab.column("payload").to_pylist()]
                )
    return times, probes


def verify(
    src: EpisodeReader,
    new: EpisodeReader,
    times: dict[str, list[int]] | None = None,
    probes: dict[str, dict[int, np.ndarray]] | None = None,
    min_psnr_db: float = 30.0,
) -> float:
    """Full read of `new` against `src`; raises ContainerError naming the first difference.
    Returns the lowest PSNR of the probed frames."""
    ep = src.meta.episode_id
    if new.meta.episode_id != ep:
        raise ContainerError(ep, f"relaid object holds episode {new.meta.episode_id!r}")
    if set(new.meta.streams) != set(src.meta.streams):
        raise ContainerError(
            ep, f"streams differ after relayout: {sorted(new.meta.streams)} vs {sorted(src.meta.streams)}"
        )
    cams = [s for s, sp in src.meta.streams.items() if sp.kind == "video"]
    if times is None:
        times = {c: [] for c in cams}
        for c, _, t in _frames(src, cams):
            times[c].append(t)
    got: dict[str, list[int]] = {c: [] for c in cams}
    worst = 99.0
    for c, rgb, t in _frames(new, cams):
        got[c].append(t)
        ref = (probes or {}).get(c, {}).get(t)
        if ref is not None:
            worst = min(worst, _psnr(rgb, ref))
    for c in cams:
        if got[c] != times[c]:
            raise ContainerError(
                ep,
                f"camera {c!r}: {len(got[c])} frames after relayout, {len(times[c])} before, "
                "or their timestamps differ",
            )
    if worst < min_psnr_db:
        raise ContainerError(ep, f"re-encoded frames have PSNR {worst:.1f} dB < {min_psnr_db} dB")
    for s, sp in src.meta.streams.items():
        if sp.kind == "video":
            continue
        a, b = _lowdim(src, s), _lowdim(new, s)
        cols = ["t_ns", "value"] if sp.kind == "array" else ["t_ns", "label", "payload"]
        if a.num_rows != b.num_rows or (a.num_rows and not a.select(cols).equals(b.select(cols))):
            raise ContainerError(ep, f"stream {s!r} differs after relayout ({b.num_rows} rows vs {a.num_rows})")
    return worst


def sibling_uri(uri: str, episode_id: str, layout_version: str) -> str:
    """`<dir>/<episode>.<layout_version>.rdep` beside the old object."""
    head = uri.rsplit("/", 1)[0] if "/" in uri else "."
    return f"{head}/{episode_id}.{layout_version}.rdep"


def rewrite(
    src: EpisodeReader, layout: Layout, dst: str, min_psnr_db: float = 30.0, check: bool = True, **storage_options: Any
) -> RewriteResult:
    """Write `src` in `layout` to `dst` (local path or fsspec URL) via a temporary object, verified
    (check=False skips the full read, e.g. for scratch copies the advisor measures)."""
    fs, path = fsspec.core.url_to_fs(dst, **storage_options)
    tmp = f"{path}.partial-{uuid.uuid4().hex[:8]}"
    local = "://" not in dst or dst.startswith("file://")
    try:
        if local:
            os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
            times, probes = _write(src, layout, tmp)
        else:
            with fs.open(tmp, "wb") as f:
                times, probes = _write(src, layout, f)
        tmp_uri = tmp if local else fs.unstrip_protocol(tmp)
        new = EpisodeReader.open(tmp_uri, **storage_options)
        try:
            psnr = verify(src, new, times, probes, min_psnr_db) if check else 99.0
            info = (new.source.size(), new.footer_offset, new.footer_length, new.layout_version)
        finally:
            new.close()
        if local:
            os.replace(tmp, path)
        else:
            fs.mv(tmp, path)  # object stores: server-side copy, the destination appears whole
    except BaseException:
        try:
            if fs.exists(tmp):
                fs.rm(tmp)
        except Exception:
            pass
        raise
    return RewriteResult(
        dst, info[3], int(info[0]), int(info[1]), int(info[2]), {c: len(v) for c, v in times.items()}, psnr
    )
