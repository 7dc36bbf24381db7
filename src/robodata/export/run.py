"""`robodata export`: a manifest's episodes to LeRobot v3.0 or MCAP.

A manifest that mixes robot types (or, for rows without one, corpora) is exported to LeRobot one
dataset per robot type, `<out_dir>/<robot type>/`, each with its true robot_type
(robodata.export.per_corpus); a part the exporter refuses (two camera sets under one robot type,
another width) leaves the other parts written and fails the export with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from robodata.curate.manifest import read_manifest
from robodata.export.episodes import ExportError
from robodata.export.per_corpus import part_of

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
    if fmt == "lerobot" and len({part_of(r) for r in rows}) > 1:
        result = _per_corpus(rows, out_dir, tick)
    elif fmt == "lerobot":
        from robodata.export.lerobot import export_lerobot

        result = export_lerobot(rows, out_dir, progress=tick)
    else:
        from robodata.export.mcap_export import export_mcap

        result = export_mcap(rows, out_dir, progress=tick)
    result["manifest"] = str(manifest)
    return result


def _per_corpus(rows: list[dict[str, Any]], out_dir: str | Path, tick: Any) -> dict[str, Any]:
    """The mixed manifest's LeRobot export, a dataset per robot type (see the module docstring)."""
    from robodata.export.per_corpus import export_per_corpus

    parts = export_per_corpus(rows, out_dir, progress=tick)
    refused = {name: p["refused"] for name, p in parts.items() if "refused" in p}
    if refused:
        written = ", ".join(f"{n} ({p['rows']} episodes) in {p['dir']}" for n, p in parts.items() if "dir" in p)
        why = "; ".join(f"part {n!r}: {reason}" for n, reason in refused.items())
        raise ExportError(
            f"the manifest mixes {len(parts)} robot types, exported one LeRobot dataset each; refused {why}"
            + (f"; written: {written}" if written else "")
        )
    return {
        "format": "lerobot",
        "dir": str(out_dir),
        "episodes": sum(p["rows"] for p in parts.values()),
        "parts": {n: {"episodes": p["rows"], "robot_type": p["robot_type"], "dir": p["dir"]} for n, p in parts.items()},
    }
