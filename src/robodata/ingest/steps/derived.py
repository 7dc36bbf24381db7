"""segments / features stages (non-critical): read accepted containers, write derived tables.

A bad container is recorded per episode (error column); a failure to write the table (or
anything systemic) raises, so the step shows as failed while the critical path stands.
"""

from __future__ import annotations

import json

import pyarrow as pa

from robodata.container import EpisodeReader
from robodata.ingest.derived import features, segments
from robodata.ingest.tables import IngestPaths

SEGMENT_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("episode_id", pa.string()),
        ("index", pa.int32()),
        ("label", pa.string()),
        ("t_start_s", pa.float64()),
        ("t_end_s", pa.float64()),
        ("method", pa.string()),
        ("error", pa.string()),
    ]
)
FEATURE_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("episode_id", pa.string()),
        ("features_json", pa.string()),
        ("visual_activity", pa.float64()),
        ("joint_speed_mean", pa.float64()),
        ("error", pa.string()),
    ]
)


def accepted(paths: IngestPaths, batch: str) -> list[dict]:
    """Converted episodes that are not quarantined (catalog qc_status would be pass)."""
    conv = paths.read("conversions", batch).to_pylist()
    qc = paths.read("qc_results", batch, ["uri", "stage", "passed"]).to_pylist()
    bad = {q["uri"] for q in qc if q["stage"] == "summary" and not q["passed"]}
    return [c for c in conv if c["ok"] and c["uri"] not in bad]


def _open(paths: IngestPaths, c: dict) -> EpisodeReader:
    return EpisodeReader.open(
        c["container_uri"], footer_offset=c["footer_offset"], footer_length=c["footer_length"], **paths.fsspec_options()
    )


def segments_batch(paths: IngestPaths, batch: str) -> dict:
    rows, failed = [], 0
    for c in accepted(paths, batch):
        try:
            segs = segments(_open(paths, c))
            rows += [
                {
                    "batch": batch,
                    "episode_id": c["episode_id"],
                    "index": i,
                    "label": lab,
                    "t_start_s": a,
                    "t_end_s": b,
                    "method": how,
                    "error": "",
                }
                for i, (lab, a, b, how) in enumerate(segs)
            ]
        except Exception as exc:  # one episode's container: record and continue
            failed += 1
            rows.append(
                {
                    "batch": batch,
                    "episode_id": c["episode_id"],
                    "index": -1,
                    "label": "",
                    "t_start_s": 0.0,
                    "t_end_s": 0.0,
                    "method": "",
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
    paths.replace("segments", pa.Table.from_pylist(rows, SEGMENT_SCHEMA), batch)
    labels: dict[str, int] = {}
    for r in rows:
        if r["label"]:
            labels[r["label"]] = labels.get(r["label"], 0) + 1
    return {"segments": sum(1 for r in rows if r["index"] >= 0), "episodes_failed": failed, "labels": labels}


def features_batch(paths: IngestPaths, batch: str, visual_frames: int = 6) -> dict:
    rows, failed = [], 0
    for c in accepted(paths, batch):
        try:
            f = features(_open(paths, c), visual_frames)
            rows.append(
                {
                    "batch": batch,
                    "episode_id": c["episode_id"],
                    "features_json": json.dumps(f, sort_keys=True),
                    "visual_activity": f.get("visual_activity"),
                    "joint_speed_mean": f.get("joint_speed_mean"),
                    "error": "",
                }
            )
        except Exception as exc:
            failed += 1
            rows.append(
                {
                    "batch": batch,
                    "episode_id": c["episode_id"],
                    "features_json": "{}",
                    "visual_activity": None,
                    "joint_speed_mean": None,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
    paths.replace("features", pa.Table.from_pylist(rows, FEATURE_SCHEMA), batch)
    return {"episodes": len(rows), "episodes_failed": failed}
