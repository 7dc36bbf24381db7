"""Compatibility entry for one legacy JPEG-folder episode: open, align, convert.

The pieces live in importers/legacy.py (reading), align.py and convert.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from robodata.container import Layout
from robodata.ingest import formats
from robodata.ingest.align import aligned_tracks
from robodata.ingest.clock import ClockFit, fit_clock
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.raw import RawEpisodeError

__all__ = ["import_legacy", "fit_clock", "ClockFit", "RawEpisodeError", "ImportResult"]


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


def import_legacy(
    episode_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], layout: Layout | None = None
) -> ImportResult:
    raw = open_raw(str(episode_dir), formats.LEGACY_JPEG.kind)
    al = aligned_tracks(raw)
    video = layout.groups[0].video if layout is not None else None
    res = convert(raw, al, out_path, video)
    return ImportResult(
        res.episode_id,
        res.uri,
        res.frames,
        res.state_steps,
        res.duration_s,
        {k: f.residual_ns for k, f in raw.clocks.items()},
        res.size_bytes,
        res.layout_version,
        res.footer_offset,
        res.footer_length,
    )
