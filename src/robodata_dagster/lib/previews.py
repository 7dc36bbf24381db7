"""Previews as asset metadata (robodata.viz.preview): a few hundred ms and KB per batch or manifest.

Previews are non-critical: a preview that cannot be drawn (an unreadable container, a codec the
thumbnailer lacks) leaves a `preview_error` line in the metadata and a warning in the run log; it
never fails the step that carries it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:
    from robodata.ingest.tables import IngestPaths

log = logging.getLogger(__name__)


def _guarded(what: str, build: Any) -> dict[str, Any]:
    from robodata.errors import RobodataError

    try:
        return build()
    except (RobodataError, OSError, ValueError) as exc:
        log.warning("%s preview not drawn: %s: %s", what, type(exc).__name__, exc)
        return {"preview_error": f"{type(exc).__name__}: {exc}"}


def batch_previews(paths: IngestPaths, batch: str) -> dict[str, Any]:
    """Thumbnail strips and a joint-state plot of a few passing episodes of `batch`, and frames
    around the failure of a few quarantined ones (those that have a container)."""

    def build() -> dict[str, Any]:
        from robodata.viz.preview import batch_episodes, batch_preview, quarantine_preview

        passing, quarantined = batch_episodes(paths, batch, limit=4)
        md: dict[str, Any] = {}
        if passing:
            md["preview"] = dg.MetadataValue.md(batch_preview(passing, episodes=3, thumbs=4).markdown)
        if quarantined:
            md["quarantine_preview"] = dg.MetadataValue.md(quarantine_preview(quarantined, episodes=4).markdown)
        return md

    return _guarded(f"batch {batch}", build)


def manifest_previews(path: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest's mixing distributions (episodes per site / task, duration histogram)."""

    def build() -> dict[str, Any]:
        import pyarrow.parquet as pq

        from robodata.storage import objects
        from robodata.viz.preview import manifest_preview

        # only the columns the preview draws: a manifest can hold millions of rows
        fs = objects.filesystem(path, storage_options)
        names = pq.read_schema(path, filesystem=fs).names
        cols = [c for c in ("site", "robot", "task", "duration_s") if c in names]
        table = pq.read_table(path, columns=cols, filesystem=fs)
        return {"preview": dg.MetadataValue.md(manifest_preview(table).markdown)}

    return _guarded(f"manifest {path}", build)
