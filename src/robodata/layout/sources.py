"""`robodata advise --source`: sample recordings (landing items any importer reads) converted
once, near-lossless, so that the advisor calibrates and measures on source-quality frames.

Stored containers are already one encode from the source (the ingestion default, H.264 CRF 23):
a quality floor measured against their frames does not see that loss, and a layout chosen on them
lands further from the source than the floor says. Converted at SOURCE_VIDEO (CRF 12, ~45+ dB from
the source on camera content), the sample's frames stand in for the source's.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

from robodata.container import VideoSettings
from robodata.errors import ConfigError
from robodata.ingest import formats
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.landing.scan import LandingItem, scan

SOURCE_VIDEO = VideoSettings(codec="h264", gop=30, crf=12, preset="veryfast")


def source_items(specs: list[str]) -> list[LandingItem]:
    """The landing items named by `specs`: a landing zone (folder or URL: every item listed under
    it), or one item inside a landing zone (a LeRobot dataset, a bag, an HDF5 file, ...)."""
    out: list[LandingItem] = []
    for spec in specs:
        spec = spec.rstrip("/")
        found = [it for it in scan(spec) if it.kind != formats.UNRECOGNIZED]
        if not found:  # the item itself: listed from its folder, by name
            parent, _, name = spec.rpartition("/")
            found = [
                it for it in scan(parent or ".") if it.name.split("#")[0] == name and it.kind != formats.UNRECOGNIZED
            ]
        if not found:
            raise ConfigError(f"--source {spec}: no recording any importer reads (docs/ingestion.md: landing items)")
        out += found
    return out


def convert_sources(
    specs: list[str],
    out_dir: str | Path,
    sample: int = 0,
    seed: int = 0,
    video: VideoSettings = SOURCE_VIDEO,
    options: ImportOptions | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Up to `sample` items (0: all; a seeded random sample otherwise) converted into containers
    under out_dir at `video`; also what to record as the plan's quality_reference. Always encoded
    at `video`, never a stream copy of the source (the calibration re-encodes and times these
    containers' frames with `video`'s codec, and the reference is what the plan says it is)."""
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers import staged_raw
    from robodata.ingest.video_copy import VideoCopyConfig

    items = source_items(specs)
    if sample and len(items) > sample:
        items = sorted(random.Random(seed).sample(items, sample), key=lambda it: it.uri)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[str] = []
    for i, it in enumerate(items):
        dst = out / f"source-{i:04d}.rdep"
        with staged_raw(it.uri, it.kind, None, 2, options) as raw:
            convert(raw, aligned_tracks(raw), dst, video=video, copy=VideoCopyConfig(mode="transcode"))
        paths.append(str(dst))
    ref = {
        "measured_against": "source",
        "items": [it.uri for it in items],
        "via": {"layout": "ingestion default", "video": asdict(video)},
    }
    return paths, ref


def containers_reference(uris: list[str]) -> dict[str, Any]:
    """The quality_reference of a plan advised over stored containers."""
    return {
        "measured_against": "containers",
        "items": list(uris),
        "note": "PSNR vs the containers' frames, themselves an encode of the source: vs the source it is lower",
    }
