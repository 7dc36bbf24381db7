"""bench.lerobot_peer's project-venv data steps: LeRobot datasets -> robodata containers and a
manifest (our importer, robodata.ingest.importers.lerobot), and a manifest file that
`robodata export` reads."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from robodata.catalog.schema import (
    MANIFEST_META_CATALOG_VERSION,
    MANIFEST_META_CONTENT_HASH,
    MANIFEST_META_HASH_SCHEME,
    MANIFEST_META_SPEC_HASH,
    MANIFEST_SCHEMA,
)
from robodata.container import EpisodeReader, VideoSettings
from robodata.container.plan import LayoutPlan
from robodata.curate.manifest import CURRENT_SCHEME, content_hash
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.importers.lerobot import dataset_episodes


def import_dataset(src: Path, out: Path, video: VideoSettings, plan: LayoutPlan | None = None) -> list[Path]:
    """Every episode of the LeRobot dataset at `src` as `out/<episode>.rdep` (kept when done); with
    a plan, in its layout (what `robodata ingest --plan` writes), else the default with `video`."""
    kind = f"lerobot-{json.loads((src / 'meta' / 'info.json').read_text())['codebase_version']}"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ep in dataset_episodes(str(src)):
        dst = out / f"ep{ep.index:06d}.rdep"
        if not dst.exists():
            raw = open_raw(f"{src}#{ep.index}", kind)
            convert(raw, aligned_tracks(raw), dst, video=video, plan=plan)
        paths.append(dst)
    return paths


def manifest_table(paths: list[Path]) -> pa.Table:
    rows = []
    for p in paths:
        r = EpisodeReader.open(p)
        streams = r.meta.streams
        cams = sorted(s for s, sp in streams.items() if sp.kind == "video")
        arrays = [s for s, sp in streams.items() if sp.kind == "array"]
        rates = {s: sp.rate_hz for s, sp in streams.items() if sp.kind in ("video", "array")}
        rows.append(
            {
                "episode_id": r.meta.episode_id,
                "uri": str(p.resolve()),
                "site": r.meta.site,
                "task": r.meta.task,
                "duration_s": r.meta.duration_s,
                "num_frames": int(round(r.meta.duration_s * rates[cams[0]])) + 1 if cams else 0,
                "num_state_steps": int(round(r.meta.duration_s * rates[arrays[0]])) + 1 if arrays else 0,
                "cameras": cams,
                "stream_rates_json": json.dumps(rates, sort_keys=True),
                "layout_version": r.layout_version,
                "size_bytes": os.path.getsize(p),
                "footer_offset": r.footer_offset,
                "footer_length": r.footer_length,
                "split": "train",
                "weight": 1.0,
            }
        )
        r.close()
    return pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA)


def write_manifest_file(table: pa.Table, path: Path) -> Path:
    """A manifest file as curation writes it (content hash in the metadata), for `robodata export`."""
    spec_hash, version = "bench-lerobot-peer", 0
    meta = {
        MANIFEST_META_CATALOG_VERSION: str(version).encode(),
        MANIFEST_META_SPEC_HASH: spec_hash.encode(),
        MANIFEST_META_CONTENT_HASH: content_hash(table, spec_hash, version).encode(),
        MANIFEST_META_HASH_SCHEME: CURRENT_SCHEME.encode(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def timed_import(src: Path, out: Path, video: VideoSettings) -> tuple[list, float]:
    t = time.perf_counter()
    paths = import_dataset(src, out, video)
    return paths, time.perf_counter() - t
