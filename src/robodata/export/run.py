"""`robodata export`: a manifest's episodes to LeRobot v3.0 or MCAP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from robodata.curate.manifest import read_manifest
from robodata.export.episodes import ExportError

FORMATS = ("lerobot", "mcap")


def export(
    manifest: str | Path,
    out_dir: str | Path,
    fmt: str,
    *,
    split: str | None = None,
    limit: int | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Export a manifest's episodes as `fmt`; `progress` (a robodata.progress.Progress) is told
    the episode count, then called with 1 after each episode."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {list(FORMATS)}")
    if split not in (None, "train", "val"):
        raise ExportError(f"split must be train or val, got {split!r}")
    table = read_manifest(manifest)
    if split:
        table = table.filter(pc.equal(table.column("split"), split))
    if limit:
        table = table.slice(0, limit)
    rows = table.to_pylist()
    if progress is not None:
        progress.set_total(len(rows))
    tick = progress if progress is not None else (lambda n: None)
    if fmt == "lerobot":
        from robodata.export.lerobot import export_lerobot

        result = export_lerobot(rows, out_dir, progress=tick)
    else:
        from robodata.export.mcap_export import export_mcap

        result = export_mcap(rows, out_dir, progress=tick)
    result["manifest"] = str(manifest)
    return result
