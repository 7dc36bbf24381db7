"""Manifest tables for dataset tests (MANIFEST_SCHEMA rows)."""

from __future__ import annotations

import json

import pyarrow as pa

from robodata.catalog.schema import MANIFEST_SCHEMA

RATES = {"cam_left": 20.0, "cam_right": 20.0, "wrist": 20.0, "joint_pos": 100.0, "cmd": 50.0, "events": 0.0}


def manifest(uris: list[str], durations: list[float], rates: dict | None = None, sizes=None, footers=None) -> pa.Table:
    n = len(uris)
    rj = json.dumps(rates or RATES, sort_keys=True)
    footers = footers or [(None, None)] * n
    return pa.table({
        "episode_id": [f"ep{i}" for i in range(n)], "uri": uris, "site": ["s"] * n, "task": ["t"] * n,
        "duration_s": durations, "num_frames": [int(d * 20) for d in durations],
        "num_state_steps": [int(d * 100) for d in durations],
        "cameras": [["cam_left", "cam_right", "wrist"]] * n, "stream_rates_json": [rj] * n,
        "layout_version": ["v1"] * n, "size_bytes": sizes or [0] * n,
        "footer_offset": [f[0] for f in footers], "footer_length": [f[1] for f in footers],
        "split": ["train"] * n, "weight": [d / sum(durations) for d in durations],  # as curation writes them
    }, schema=MANIFEST_SCHEMA)
