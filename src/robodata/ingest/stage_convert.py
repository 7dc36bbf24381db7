"""episodes stage: convert a batch's accepted episodes into containers, bins in parallel.

Episodes quarantined by a blocking pre-conversion check are skipped. The rest are split
into `workers` bins of near-equal bytes (robodata.ingest.binpack) and each bin is converted
in its own process; a failing episode is recorded (ok = false, error) and the bin goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc

from robodata.errors import RobodataError
from robodata.ingest.align import AlignedTracks
from robodata.ingest.binpack import balance, work_estimate
from robodata.ingest.convert import convert
from robodata.ingest.importers import staged_raw
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from robodata.storage import StorageLocation, objects

CONVERSION_SCHEMA = pa.schema([
    ("batch", pa.string()), ("uri", pa.string()), ("episode_id", pa.string()), ("container_uri", pa.string()),
    ("ok", pa.bool_()), ("error", pa.string()), ("size_bytes", pa.int64()), ("duration_s", pa.float64()),
    ("frames_min", pa.int32()), ("state_steps", pa.int32()), ("layout_version", pa.string()),
    ("footer_offset", pa.int64()), ("footer_length", pa.int64()), ("seconds", pa.float64()),
    ("worker", pa.int32()),
])


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
        dest = j["container"]
        with staged_raw(j["uri"], j["kind"], s.topic_map, s.decode_threads) as raw, \
                objects.local_output(dest, StorageLocation.from_env(s.root).fsspec_options()) as out:
            res = convert(raw, al, out, s.video)
        row.update(container_uri=dest, ok=True, error="", size_bytes=res.size_bytes, duration_s=res.duration_s,
                   frames_min=min(res.frames.values(), default=0), state_steps=res.state_steps,
                   layout_version=res.layout_version, footer_offset=res.footer_offset, footer_length=res.footer_length)
    except RobodataError as exc:
        row.update(container_uri="", ok=False, error=str(exc))
    except Exception as exc:  # a codec / library failure on this episode only
        row.update(container_uri="", ok=False, error=f"{type(exc).__name__}: {exc}")
    row["seconds"] = time.perf_counter() - t0
    return row


def run_workers(bins: list[list[dict]], sd: dict, stage: str = "convert") -> list[dict]:
    """One `python -m robodata.ingest.worker` per bin, all at once; rows stream back as JSON lines."""
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    procs = []
    for w, b in enumerate(bins):
        err_f = tempfile.TemporaryFile("w+")
        p = subprocess.Popen([sys.executable, "-m", "robodata.ingest.worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=err_f, env=env, text=True)
        procs.append((w, b, p, err_f))
        p.stdin.write(json.dumps({"worker": w, "stage": stage, "settings": sd, "jobs": b}))  # type: ignore[union-attr]
        p.stdin.close()  # type: ignore[union-attr]
    rows: list[dict] = []
    for w, b, p, err_f in procs:
        out = p.stdout.read()  # type: ignore[union-attr]
        p.wait()
        err_f.seek(0)
        err = err_f.read()
        err_f.close()
        got = [json.loads(x) for x in out.splitlines() if x.strip()]
        rows += got
        done = {r["uri"] for r in got}
        if p.returncode != 0 or len(done) < len(b):
            why = f"{stage} worker {w} exited with code {p.returncode}: {err.strip()[-500:]}"
            rows += [{"uri": j["uri"], "kind": j.get("kind", ""), "episode_id": j.get("episode_id", ""), "worker": w,
                      "container_uri": "", "ok": False, "error": why, "seconds": 0.0, "size_bytes": j.get("size_bytes", 0)}
                     for j in b if j["uri"] not in done]
    return rows


def plan_bins(jobs: list[dict], workers: int) -> list[list[dict]]:
    bins = balance([work_estimate(j.get("decoded_bytes") or 0, j["size_bytes"]) for j in jobs],
                   max(1, min(workers, len(jobs))))
    return [[jobs[i] for i in b] for b in bins if b]


def settings_dict(settings: IngestSettings) -> dict:
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(settings)))


def convert_batch(paths: IngestPaths, batch: str, settings: IngestSettings, episodes: set[str] | None = None) -> dict:
    al = paths.read("aligned_tracks", batch,
                    ["uri", "kind", "episode_id", "ok", "size_bytes", "decoded_bytes", "alignment_json"]).to_pylist()
    skip = quarantined(paths, batch, "pre")
    jobs = [dict(r, container=paths.container(batch, r["episode_id"])) for r in al
            if r["ok"] and r["uri"] not in skip and (episodes is None or r["episode_id"] in episodes)]
    bins = plan_bins(jobs, settings.workers)
    sd = settings_dict(settings)
    started = time.perf_counter()
    rows: list[dict] = []
    if len(bins) <= 1:
        for b in bins:
            rows += [convert_one(j, settings) for j in b]
    else:
        rows = run_workers(bins, sd)
    wall = time.perf_counter() - started
    for r in rows:
        r["batch"] = batch
    paths.replace("conversions", pa.Table.from_pylist(rows, CONVERSION_SCHEMA), batch)
    ok = [r for r in rows if r["ok"]]
    loads = [sum(work_estimate(j.get("decoded_bytes") or 0, j["size_bytes"]) for j in b) for b in bins]
    return {"converted": len(ok), "failed": len(rows) - len(ok), "skipped_quarantined": len(skip),
            "bytes_written": sum(r["size_bytes"] for r in ok), "wall_s": round(wall, 3), "bins": len(bins),
            "bin_work_max_over_mean": round(max(loads) / (sum(loads) / len(loads)), 4) if loads else 0.0}
