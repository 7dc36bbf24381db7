"""Previews for the Dagster UI, Dagster-free: small images inside a markdown string.

- `batch_preview`: per camera a thumbnail strip of a few of a batch's episodes (keyframes only:
  one decoded frame per thumbnail) and a joint-state plot;
- `quarantine_preview`: for each quarantined episode of a batch that has a container, frames
  around the failure (robodata.viz.qc.locate) and the reason;
- `manifest_preview`: the mixing distributions of a manifest (episodes per site/robot/task,
  duration histogram).

Each reads a bounded amount (a few episodes, a few frames each), so its cost does not grow with
the batch. The markdown goes into an asset's metadata as `MetadataValue.md(preview.markdown)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robodata.container import EpisodeReader
from robodata.curate.acceptance_plot import png_markdown
from robodata.errors import RobodataError
from robodata.viz.images import bars_png, jpeg_markdown, lines_png, strip_jpeg
from robodata.viz.qc import QcFinding, locate

if TYPE_CHECKING:
    from robodata.ingest.tables import IngestPaths


@dataclass(frozen=True)
class Preview:
    """Markdown with its images embedded (base64 JPEG strips, PNG plots), and the PNGs themselves by name."""

    markdown: str
    images: dict[str, bytes] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return len(self.markdown.encode())


def _cameras(r: EpisodeReader) -> list[str]:
    return [s for s, spec in r.meta.streams.items() if spec.kind == "video"]


def keyframe_thumbnails(r: EpisodeReader, camera: str, n: int) -> list[np.ndarray]:
    """`n` frames of `camera` spread over the episode, each a part's first (key)frame."""
    starts = [p.t_start for c in r.chunks for p in c.parts if p.stream == camera]
    if not starts:
        return []
    pick = sorted({starts[int(i)] for i in np.linspace(0, len(starts) - 1, min(n, len(starts)))})
    out = []
    for t in pick:
        w = r.read_window(t / 1e9, t / 1e9, [camera])[camera]
        if len(w.data):
            out.append(w.data[0])
    return out


def frames_around(r: EpisodeReader, camera: str, t_s: float, n: int = 5, span_s: float = 1.0) -> list[np.ndarray]:
    """Up to `n` frames of `camera` within +-span_s/2 of t_s."""
    rate = r.meta.streams[camera].rate_hz or 30.0
    every = max(1, int(round(span_s * rate / max(n, 1))))
    w = r.read_window(max(t_s - span_s / 2, 0.0), t_s + span_s / 2, [camera], every=every)[camera]
    return list(w.data[:n])


def batch_preview(
    uris: list[str],
    *,
    episodes: int = 3,
    thumbs: int = 4,
    height: int = 64,
    joint_stream: str = "joint_pos",
    plot_s: float = 30.0,
) -> Preview:
    """Thumbnail strip per camera (a row per episode) and a joint-state plot of the first `episodes`.

    Args:
        uris: the batch's containers (passing episodes first: the preview shows the first few).
        episodes, thumbs, height: how many episodes, thumbnails per episode, thumbnail height.
        joint_stream: the array stream to plot, over its first `plot_s` seconds (bounded cost).

    Returns:
        The Preview; an episode that cannot be read is named in the markdown, never raised.
    """
    md, images = ["### Batch preview"], {}
    rows: dict[str, list[list[np.ndarray]]] = {}
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    shown = []
    for uri in uris[:episodes]:
        try:
            r = EpisodeReader.open(uri)
            for cam in _cameras(r):
                rows.setdefault(cam, []).append(keyframe_thumbnails(r, cam, thumbs))
            if joint_stream in r.meta.streams:
                w = r.read_window(0, plot_s, [joint_stream])[joint_stream]
                step = max(1, len(w.t) // 400)
                series[r.meta.episode_id] = (w.t[::step], w.data[::step])
            shown.append(r.meta.episode_id)
            r.close()
        except (RobodataError, OSError) as exc:
            md.append(f"- {uri}: cannot preview ({exc})")
    md.append(f"{len(shown)} of {len(uris)} episodes: {', '.join(shown)}")
    for cam, strip in rows.items():
        images[f"strip_{cam}"] = strip_jpeg(strip, height)
        md += [f"**{cam}**", jpeg_markdown(images[f"strip_{cam}"], f"{cam} thumbnails")]
    if series:
        images["joints"] = lines_png(series, f"{joint_stream}, first {plot_s:g} s of {len(series)} episodes")
        md += [f"**{joint_stream}**", png_markdown(images["joints"], f"{joint_stream} plot")]
    return Preview("\n\n".join(md), images)


def quarantine_preview(
    quarantined: list[tuple[str, list[QcFinding]]], *, episodes: int = 4, frames: int = 5, height: int = 64
) -> Preview:
    """For each (container uri, its failed QC findings): frames of each camera around the failure.

    Args:
        quarantined: quarantined episodes that have a container, with their findings
            (robodata.viz.qc.read_qc, failed ones; see `quarantined_in_batch`).
        episodes, frames, height: how many episodes, frames per camera, thumbnail height.
    """
    md, images = ["### Quarantined episodes"], {}
    for uri, findings in quarantined[:episodes]:
        failed = [f for f in findings if not f.passed and f.stage != "summary"] or findings
        reason = "; ".join(f"{f.check}: {f.reason}" for f in failed)[:500]
        try:
            r = EpisodeReader.open(uri)
            t = max((locate(r, f) for f in failed), default=0.0)
            rows = [frames_around(r, cam, t, frames) for cam in _cameras(r)]
            eid = r.meta.episode_id
            r.close()
        except (RobodataError, OSError) as exc:
            md.append(f"- {uri}: {reason} (frames unreadable: {exc})")
            continue
        md.append(f"**{eid}** at t = {t:.2f} s: {reason}")
        if any(rows):
            images[f"q_{eid}"] = strip_jpeg([x for x in rows if x], height)
            md.append(jpeg_markdown(images[f"q_{eid}"], f"{eid} around the failure"))
    if len(quarantined) > episodes:
        md.append(f"(+{len(quarantined) - episodes} more quarantined with containers)")
    if not quarantined:
        md.append("none with frames")
    return Preview("\n\n".join(md), images)


def manifest_preview(manifest: pa.Table) -> Preview:
    """Episodes per site / robot / task (the columns the manifest has) and a duration histogram."""
    panels = {}
    for col in ("site", "robot", "task"):
        if col in manifest.column_names:
            vc = pc.value_counts(manifest.column(col)).to_pylist()
            panels[f"episodes per {col}"] = {str(d["values"]): float(d["counts"]) for d in vc}
    dur = (
        manifest.column("duration_s").to_numpy(zero_copy_only=False) if "duration_s" in manifest.column_names else None
    )
    png = bars_png(panels, ("duration (s)", dur) if dur is not None and len(dur) else None)
    hours = float(np.nansum(dur)) / 3600 if dur is not None else 0.0
    md = ["### Manifest mix", f"{manifest.num_rows} episodes, {hours:.2f} h", png_markdown(png, "manifest mix")]
    return Preview("\n\n".join(md), {"mix": png})


def batch_episodes(
    root: str | IngestPaths, batch: str, limit: int = 8
) -> tuple[list[str], list[tuple[str, list[QcFinding]]]]:
    """(containers of passing episodes, [(container, findings)] of quarantined ones that have a
    container) of `batch` under the storage root, from its qc_results table; at most `limit` of
    each (in episode-id order), so a large batch costs a bounded number of existence checks."""
    import fsspec

    from robodata.ingest.tables import IngestPaths, open_table

    paths = root if isinstance(root, IngestPaths) else IngestPaths(root)
    dt = open_table(paths.table("qc_results"), paths.delta_options())
    if dt is None:
        return [], []
    rows = dt.to_pyarrow_table(filters=[("batch", "=", batch)]).to_pylist()
    fs, _ = fsspec.core.url_to_fs(paths.containers, **paths.fsspec_options())
    passing: list[str] = []
    bad: list[tuple[str, list[QcFinding]]] = []
    for r in sorted((r for r in rows if r["stage"] == "summary" and r["episode_id"]), key=lambda r: r["episode_id"]):
        try:
            uri = paths.container(batch, r["episode_id"])
        except RobodataError:
            continue
        if len(passing if r["passed"] else bad) >= limit or not fs.exists(uri):
            continue
        if r["passed"]:
            passing.append(uri)
        else:
            mine = [x for x in rows if x["episode_id"] == r["episode_id"] and not x["passed"]]
            findings = [QcFinding(x["stage"], x["check"], False, bool(x["blocking"]), x["reason"] or "") for x in mine]
            bad.append((uri, findings))
    return passing, bad
