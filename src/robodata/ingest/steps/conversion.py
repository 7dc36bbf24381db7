"""One episode converted into its container, as a conversions row: the work of the episodes stage,
also run in the alignment's read for the formats that read a recording whole
(robodata.ingest.steps.one_pass)."""

from __future__ import annotations

from robodata.ingest.align import AlignedTracks
from robodata.ingest.convert import convert
from robodata.ingest.settings import IngestSettings
from robodata.storage import StorageLocation, objects


def convert_into(raw, al: AlignedTracks, dest: str, settings: IngestSettings) -> dict:
    """Convert `raw` (aligned as `al`) into the container `dest` (local or remote); the row's
    conversion facts, `video` (each camera's copy / transcode decision) included."""
    with objects.local_output(dest, StorageLocation.from_env(dest).fsspec_options()) as out:
        res = convert(raw, al, out, settings.video, settings.layout_plan, settings.video_copy)
    return {
        "container_uri": dest,
        "ok": True,
        "error": "",
        "size_bytes": res.size_bytes,
        "duration_s": res.duration_s,
        "frames_min": min(res.frames.values(), default=0),
        "state_steps": res.state_steps,
        "layout_version": res.layout_version,
        "footer_offset": res.footer_offset,
        "footer_length": res.footer_length,
        "video": res.video,
    }
