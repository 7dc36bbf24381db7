"""Variations real recordings carry (issue 36), for bench.robustness's semantics section: true
recordings robodata read wrongly, each in the form a real public one has it (tests/data/real/):

    lerobot   actions: features `actions` / `state` (open_50), not `action` / `observation.state`
              to_last: v3.0 whose to_timestamp is the last frame's time (open_50), not one past it
    zarr      pixels: state in pixels (PushT, 0..512), not radians
              float_img: frames stored as float32 0..255 (PushT)
              no_camera: no camera at all (a state-only replay buffer, as IMU / telemetry bags)
    rlds      no_last: steps/is_last never set (octo's debug set)

None is a lie: each must pass with true facts, carrying only the findings (non-blocking failed
checks) its format truly earns, which `Truth.findings` names; FINDINGS says which a clean recording
of each family earns (no units in LeRobot / Zarr / RLDS, no control rate in RLDS).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

VARIATIONS = {"lerobot": ("actions", "to_last"), "zarr": ("pixels", "float_img", "no_camera"), "rlds": ("no_last",)}
NAMES = {v for vs in VARIATIONS.values() for v in vs}
FINDINGS = {  # the non-blocking checks a clean recording of the family fails: facts of its format
    "lerobot": frozenset({"units_declared"}),
    "zarr": frozenset({"units_declared"}),
    "rlds": frozenset({"units_declared", "rate_declared"}),
}
ALLOWED = sorted({"units_declared", "rate_declared", "episode_framed", "frames_match_state"})


def lerobot_variation(d: Path, variation: str, n: int, fps: float) -> None:
    """`d` (written by write_lerobot: v2.1 for `actions`, v3.0 for `to_last`) given the variation."""
    if variation == "actions":
        info_p = d / "meta" / "info.json"
        info = json.loads(info_p.read_text())
        rename = {"action": "actions", "observation.state": "state"}
        info["features"] = {rename.get(k, k): v for k, v in info["features"].items()}
        info_p.write_text(json.dumps(info))
        for f in (d / "data").rglob("*.parquet"):
            t = pq.read_table(f)
            pq.write_table(t.rename_columns([rename.get(c, c) for c in t.column_names]), f)
    elif variation == "to_last":
        for f in (d / "meta" / "episodes").rglob("*.parquet"):
            t = pq.read_table(f)
            for c in [c for c in t.column_names if c.endswith("/to_timestamp")]:
                last = pa.array([(n - 1) / fps] * t.num_rows, t.schema.field(c).type)
                t = t.set_column(t.schema.get_field_index(c), c, last)
            pq.write_table(t, f)


def zarr_variation(path: Path, variation: str, camera: str) -> None:
    """The synthetic replay buffer at `path` given the variation (`camera`: its camera key)."""
    import zarr

    g: Any = zarr.open_group(str(path), mode="r+", zarr_format=2)
    if variation == "pixels":
        state = np.asarray(g["data/state"][:]) * 400.0 + 256.0  # positions in a 512-pixel frame
        g["data"].create_array(
            "state", data=state.astype(np.float32), overwrite=True, config={"write_empty_chunks": True}
        )
    elif variation == "float_img":
        frames = np.asarray(g[f"data/{camera}"][:]).astype(np.float32)
        g["data"].create_array(
            camera, data=frames, chunks=(1, *frames.shape[1:]), overwrite=True, config={"write_empty_chunks": True}
        )
    elif variation == "no_camera":
        shutil.rmtree(path / "data" / camera)


def rlds_no_last(path: Path) -> None:
    """steps/is_last cleared at every step of the one-episode dataset at `path`."""
    from tests.core.helpers_semantics import _rlds_rewrite

    def edit(feats: dict) -> None:
        feats["steps/is_last"] = np.zeros_like(np.asarray(feats["steps/is_last"]))

    _rlds_rewrite(path, edit)


def export_wrong(out: Path, rows: list[dict]) -> list[str]:
    """What a LeRobot export at `out` of manifest `rows` got wrong, read back with pyarrow against each
    container: rows other than the container's frames (its fullest camera's, or its state steps), or
    an action column equal to the state column where the container's action and state differ."""
    import pyarrow.compute as pc

    from robodata.container import EpisodeReader

    data = pq.read_table(next((out / "data").glob("*/*.parquet")))
    by_id = {r["episode_id"]: r for r in rows}
    wrong = []
    for e in pq.read_table(next((out / "meta" / "episodes").glob("*/*.parquet"))).to_pylist():
        r = EpisodeReader.open(by_id[e["robodata/episode_id"]]["uri"])
        counts: dict[str, int] = {}
        for ch in r.chunks:
            for p in ch.parts:
                counts[p.stream] = counts.get(p.stream, 0) + p.count
        cams = [s for s, spec in r.meta.streams.items() if spec.kind == "video"]
        roles = r.meta.extra.get("roles") or {}
        want = max(counts[c] for c in cams) if cams else counts.get(roles.get("state", ""), 0)
        sel = data.filter(pc.equal(data["episode_index"], e["episode_index"]))
        state = np.array(sel["observation.state"].to_pylist(), np.float32)
        action = np.array(sel["action"].to_pylist(), np.float32)
        if sel.num_rows != want:
            wrong.append(f"{e['robodata/episode_id']}: {sel.num_rows} rows for the container's {want} frames")
        elif action.shape == state.shape and np.array_equal(action, state):
            win = r.read_window(0.0, r.meta.duration_s + 1.0, [roles["state"], roles["action"]])
            if not np.array_equal(win[roles["state"]].data, win[roles["action"]].data):
                wrong.append(f"{e['robodata/episode_id']}: the action column holds the state")
        r.close()
    return wrong
