"""episodes stage: convert a batch's accepted episodes into containers, in parallel.

Episodes quarantined by a blocking pre-conversion check are skipped. The rest are ordered
largest estimated work first (robodata.ingest.workers.binpack) and pulled by `workers` processes
as each finishes its previous one (robodata.ingest.workers.dispatch), so the work bins come out of
near-equal real time; a failing episode is recorded (ok = false, error) and the rest go on.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from robodata.errors import RobodataError
from robodata.ingest.align import AlignedTracks
from robodata.ingest.importers import staged_raw
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps import one_pass
from robodata.ingest.steps.conversion import convert_into
from robodata.ingest.tables import IngestPaths
from robodata.ingest.workers.binpack import lpt_order, work_estimate
from robodata.ingest.workers.dispatch import run_pool

CONVERSION_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("uri", pa.string()),
        ("episode_id", pa.string()),
        ("container_uri", pa.string()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
        ("size_bytes", pa.int64()),
        ("duration_s", pa.float64()),
        ("frames_min", pa.int32()),
        ("state_steps", pa.int32()),
        ("layout_version", pa.string()),
        ("footer_offset", pa.int64()),
        ("footer_length", pa.int64()),
        ("seconds", pa.float64()),
        ("worker", pa.int32()),
    ]
)


def quarantined(paths: IngestPaths, batch: str, stage: str = "pre") -> set[str]:
    """uris with a failed blocking check in `stage` (or any stage when stage is '')."""
    if not paths.has("qc_results"):
        return set()
    t = paths.read("qc_results", batch, ["uri", "stage", "passed", "blocking"])
    m = pc.and_(pc.invert(t.column("passed")), t.column("blocking"))
    if stage:
        m = pc.and_(m, pc.equal(t.column("stage"), stage))
    return set(t.filter(m).column("uri").to_pylist())


def convert_one(j: dict, s: IngestSettings, worker: int = 0) -> dict:
    t0 = time.perf_counter()
    row = {"uri": j["uri"], "episode_id": j["episode_id"], "worker": worker}
    try:
        al = AlignedTracks.from_json(j["alignment_json"])
        with staged_raw(j["uri"], j["kind"], None, s.decode_threads, s.import_options) as raw:
            row.update(convert_into(raw, al, j["container"], s))
    except RobodataError as exc:
        row.update(container_uri="", ok=False, error=str(exc))
    except Exception as exc:  # a codec / library failure on this episode only
        row.update(container_uri="", ok=False, error=f"{type(exc).__name__}: {exc}")
    row["seconds"] = time.perf_counter() - t0
    return row


def plan_order(jobs: list[dict]) -> list[dict]:
    """Largest estimated work first (ties by uri): the order the worker pool hands jobs out."""
    work = [work_estimate(j.get("decoded_bytes") or 0, j["size_bytes"]) for j in jobs]
    return [jobs[i] for i in lpt_order(work, [j["uri"] for j in jobs])]


def convert_batch(paths: IngestPaths, batch: str, settings: IngestSettings, episodes: set[str] | None = None) -> dict:
    al = paths.read("aligned_tracks", batch).to_pylist()  # staged_json: a table written before it has none
    skip = quarantined(paths, batch, "pre")
    jobs, refused, committed = [], [], []
    shaped = one_pass.fingerprint(settings)
    started = time.perf_counter()
    for r in al:
        staged = paths.staged_container(batch, r["uri"]) if r.get("staged_json") else ""
        if not r["ok"] or r["uri"] in skip or (episodes is not None and r["episode_id"] not in episodes):
            continue  # a staged container of a skipped episode goes with the staged folder (below)
        try:  # names were checked when read; the write is confined under containers/<batch>/ regardless
            dest = paths.container(batch, r["episode_id"])
        except RobodataError as exc:
            refused.append({"uri": r["uri"], "episode_id": r["episode_id"], "worker": 0, "container_uri": ""})
            refused[-1].update(ok=False, error=str(exc), seconds=0.0)
            if staged:
                one_pass.discard(staged)
            continue
        row = one_pass.commit(r.get("staged_json"), staged, dest, shaped) if staged else None
        if row is not None:  # converted in the alignment's read: committed, the item not read again
            committed.append({**row, "uri": r["uri"], "episode_id": r["episode_id"], "worker": 0})
        else:
            jobs.append(dict(r, container=dest, staged_json=None))
    jobs = plan_order(jobs)
    n_workers = max(1, min(settings.workers, len(jobs)))
    sd = settings.to_dict()
    rows = [convert_one(j, settings) for j in jobs] if n_workers <= 1 else run_pool(jobs, n_workers, sd)
    busy: dict[int, float] = {}  # this stage's workers only
    for r in rows:
        busy[r["worker"]] = busy.get(r["worker"], 0.0) + float(r.get("seconds") or 0.0)
    rows += committed + refused
    if episodes is None:  # the whole batch: nothing staged is left to commit
        one_pass.clear(paths.staged_folder(batch))
    wall = time.perf_counter() - started
    video = video_summary([r.pop("video", None) or {} for r in rows])
    for r in rows:
        r["batch"] = batch
    paths.replace("conversions", pa.Table.from_pylist(rows, CONVERSION_SCHEMA), batch)
    ok = [r for r in rows if r["ok"]]
    spread = max(busy.values()) / (sum(busy.values()) / len(busy)) if busy and sum(busy.values()) > 0 else 0.0
    return {
        "converted": len(ok),
        "failed": len(rows) - len(ok),
        "skipped_quarantined": len(skip),
        "converted_in_alignment": len(committed),
        "bytes_written": sum(r["size_bytes"] for r in ok),
        "wall_s": round(wall, 3),
        "workers": n_workers,
        "worker_busy_max_over_mean": round(spread, 4),
        **video,
    }


def video_summary(decisions: list[dict[str, dict[str, str]]], top: int = 8) -> dict:
    """Streams copied and transcoded over a batch, and the commonest reasons for transcoding (a
    handful of figures for the asset's metadata; each episode's own are in the catalog, video_json)."""
    modes = [d for ep in decisions for d in ep.values()]
    why: dict[str, int] = {}
    for d in modes:
        if d["mode"] == "transcode":
            why[d["reason"]] = why.get(d["reason"], 0) + 1
    return {
        "video_copied_streams": sum(d["mode"] == "copy" for d in modes),
        "video_transcoded_streams": sum(d["mode"] == "transcode" for d in modes),
        "video_transcode_reasons": dict(sorted(why.items(), key=lambda kv: -kv[1])[:top]),
    }
