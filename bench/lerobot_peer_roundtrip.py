"""bench.lerobot_peer step 6: our LeRobot export loaded by LeRobot itself, and a v2.1 import ->
export -> import round trip.

For the imported v3.0 set and the imported v2.1 set: `robodata export --format lerobot`, then
LeRobotDataset over the export returns the VLA agreement samples, compared with PatternDataset
over the manifest that was exported (state/action must be exact, frame indices equal, frames at
>= 35 dB). The v2.1 export is imported again by our importer and compared with the first import.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from bench.lerobot_peer_check import compare, episode_from_index, export_dataset, run_json
from bench.lerobot_peer_data import import_dataset, manifest_table, write_manifest_file
from robodata.container import EpisodeReader, VideoSettings

MIN_PSNR_DB = 35.0
FPS = 30


def _equal(c: dict) -> bool:
    return bool(
        c["state_max_abs_diff"] == 0.0
        and c["action_max_abs_diff"] == 0.0
        and c["frame_index_mismatches"] == 0
        and c["psnr_db_min"] >= MIN_PSNR_DB
    )


def _respec(spec: Path, root: Path, dst: Path) -> Path:
    """The same anchors as LeRobot global indices of the export at `root` (episode i = manifest row i)."""
    d = json.loads(spec.read_text())
    starts = episode_from_index(root)
    d["indices"] = [starts[int(row)] + round(float(t) * FPS) for row, t in d["anchors"]]
    dst.write_text(json.dumps(d))
    return dst


def _ours_items(manifest: Path, spec: Path, out: Path, log) -> Path:
    cmd = [sys.executable, "-m", "bench.lerobot_peer_ours", "items", "--manifest", str(manifest)]
    run_json([*cmd, "--spec", str(spec), "--out", str(out)], log)
    return out


def _loaded_by_lerobot(peer_py: Path, side: str, export: Path, spec: Path, ours: Path, n: int, cams, log) -> dict:
    lr_spec = _respec(spec, export, export.with_name(export.name + ".spec.json"))
    lr_npz = export.with_name(export.name + ".lerobot.npz")
    try:
        run_json(
            [str(peer_py), side, "items", "--root", str(export), "--spec", str(lr_spec), "--out", str(lr_npz)], log
        )
    except RuntimeError as exc:
        log(f"LeRobot rejects {export}: {exc}")
        return {"loads": False, "error": str(exc)[-600:]}
    c = compare(lr_npz, ours, n, list(cams))
    return {"loads": True, "equal": _equal(c), **c}


def roundtrip(
    work: Path,
    peer_py: Path,
    side: str,
    manifest3: Path,
    ours21: list[Path],
    specs: dict,
    cams,
    n: int,
    log: Callable[[str], None],
) -> dict:
    spec = specs["vla"]["agree"]
    out: dict = {}
    # v3.0 import -> export -> LeRobotDataset
    ex3 = export_dataset(manifest3, work / "export_v3", log)
    out["export_v3"] = _loaded_by_lerobot(peer_py, side, ex3, spec, work / "vla_agree_ours_default.npz", n, cams, log)
    # v2.1 import -> export -> LeRobotDataset, and -> our importer again
    man21 = write_manifest_file(manifest_table(ours21), work / "v2.1.manifest.parquet")
    ours21_npz = _ours_items(man21, spec, work / "vla_agree_ours_v21.npz", log)
    ex21 = export_dataset(man21, work / "export_v21", log)
    out["export_v21"] = _loaded_by_lerobot(peer_py, side, ex21, spec, ours21_npz, n, cams, log)
    video = EpisodeReader.open(ours21[0]).layout.group_of(cams[0]).video or VideoSettings()
    again = import_dataset(ex21, work / "export_v21_reimported", video)
    man_again = write_manifest_file(manifest_table(again), work / "v2.1.reimport.manifest.parquet")
    again_npz = _ours_items(man_again, spec, work / "vla_agree_ours_v21_reimport.npz", log)
    c = compare(ours21_npz, again_npz, n, list(cams), lerobot_first=False)
    out["v21_import_export_import"] = {"equal": _equal(c), **c}
    loads = [out[k]["loads"] for k in ("export_v3", "export_v21")]
    out["export_loads_in_lerobot"] = all(loads)
    out["export_items_equal"] = all(loads) and all(
        out[k]["equal"] for k in ("export_v3", "export_v21", "v21_import_export_import")
    )
    return out
