"""Manifest tables for dataset tests (MANIFEST_BASE_SCHEMA rows)."""

from __future__ import annotations

import json

import pyarrow as pa

from robodata.catalog.schema import MANIFEST_BASE_SCHEMA

RATES = {"cam_left": 20.0, "cam_right": 20.0, "wrist": 20.0, "joint_pos": 100.0, "cmd": 50.0, "events": 0.0}


def manifest(uris: list[str], durations: list[float], rates: dict | None = None, sizes=None, footers=None) -> pa.Table:
    """Rows over `uris`; a row's episode_id is its container's (the loader checks it), or ep<i>
    where there is no container."""
    n = len(uris)
    rj = json.dumps(rates or RATES, sort_keys=True)
    footers = footers or [(None, None)] * n
    total = sum(durations)
    return pa.table(
        {
            "episode_id": [_episode_id(u, i) for i, u in enumerate(uris)],
            "uri": uris,
            "site": ["s"] * n,
            "task": ["t"] * n,
            "duration_s": durations,
            "num_frames": [int(d * 20) for d in durations],
            "num_state_steps": [int(d * 100) for d in durations],
            "cameras": [["cam_left", "cam_right", "wrist"]] * n,
            "stream_rates_json": [rj] * n,
            "layout_version": ["v1"] * n,
            "size_bytes": sizes or [0] * n,
            "footer_offset": [f[0] for f in footers],
            "footer_length": [f[1] for f in footers],
            "split": ["train"] * n,
            "weight": [d / total for d in durations],  # as curation writes them
        },
        schema=MANIFEST_BASE_SCHEMA,  # a manifest of before issue 37 (read_manifest adds the mixing facts as nulls)
    )


def write_manifest_of_small_episodes(
    directory, n: int, duration_s: float, content_hash: bytes, spec_hash: bytes, catalog_version: int
):
    """n small containers (helpers_container.write_small) plus a manifest Parquet over them, with
    lineage metadata as curation writes it; returns the manifest path."""
    import os
    from pathlib import Path

    import pyarrow.parquet as pq

    from robodata.catalog.schema import (
        MANIFEST_META_CATALOG_VERSION,
        MANIFEST_META_CONTENT_HASH,
        MANIFEST_META_SPEC_HASH,
    )
    from robodata.container import EpisodeReader
    from tests.core.helpers_container import write_small

    directory = Path(directory)
    paths, hints = [], []
    for i in range(n):
        p = directory / f"ep{i}.rdep"
        write_small(p, duration_s=duration_s, episode_id=f"ep{i}")
        r = EpisodeReader.open(p)
        paths.append(str(p))
        hints.append((r.footer_offset, r.footer_length))
    table = manifest(paths, [duration_s] * n, sizes=[os.path.getsize(p) for p in paths], footers=hints)
    table = table.replace_schema_metadata(
        {
            MANIFEST_META_CONTENT_HASH: content_hash,
            MANIFEST_META_SPEC_HASH: spec_hash,
            MANIFEST_META_CATALOG_VERSION: str(catalog_version).encode(),
        }
    )
    path = directory / "m.parquet"
    pq.write_table(table, path)
    return path


def _episode_id(uri: str, i: int) -> str:
    import os

    from robodata.container import EpisodeReader
    from robodata.errors import ContainerError

    try:
        r = EpisodeReader.open(uri) if uri and os.path.isfile(uri) else None
    except ContainerError:  # a test's damaged container
        r = None
    if r is None:
        return f"ep{i}"
    r.close()
    return r.meta.episode_id
