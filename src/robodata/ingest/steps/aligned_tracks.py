"""aligned_tracks stage: open every raw episode of a batch, align its clocks, record the result.

A read failure is a fact about that episode (error column), never an exception for the batch.
"""

from __future__ import annotations

import pyarrow as pa

from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import staged_raw
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths

ALIGNED_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("uri", pa.string()),
        ("kind", pa.string()),
        ("episode_id", pa.string()),
        ("source", pa.string()),
        ("vendor", pa.string()),
        ("robot", pa.string()),
        ("site", pa.string()),
        ("task", pa.string()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
        ("alignment_error_ms", pa.float64()),
        ("assign_error_ms", pa.float64()),
        ("span_s", pa.float64()),
        ("size_bytes", pa.int64()),
        ("decoded_bytes", pa.int64()),  # frames x H x W x 3 over cameras: the conversion work estimate
        ("alignment_json", pa.string()),
    ]
)


def align_one(uri: str, kind: str, settings: IngestSettings) -> dict:
    try:
        with staged_raw(uri, kind, settings.topic_map, decode_threads=0) as raw:
            al = aligned_tracks(raw)
    except RawEpisodeError as exc:
        return {"uri": uri, "kind": kind, "episode_id": "", "ok": False, "error": str(exc)}
    except Exception as exc:  # an importer bug or an unexpected format: still one episode's problem
        return {"uri": uri, "kind": kind, "episode_id": "", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "uri": uri,
        "kind": kind,
        "episode_id": raw.episode_id,
        "source": raw.source,
        "vendor": raw.vendor,
        "robot": raw.robot,
        "site": raw.site,
        "task": raw.task,
        "ok": True,
        "error": "",
        "alignment_error_ms": al.alignment_error_ms,
        "assign_error_ms": al.assign_error_ms,
        "span_s": max((t.last_s for t in al.timing.values()), default=0.0),
        "alignment_json": al.to_json(),
        "decoded_bytes": decoded_bytes(raw),
    }


def decoded_bytes(raw) -> int:
    return int(sum(len(c.t_ns) * c.height * c.width * 3 for c in raw.cameras.values()))


def align_batch(paths: IngestPaths, batch: str, settings: IngestSettings) -> dict:
    """Serial for small batches; otherwise the same worker processes as conversion (MCAP scans
    parse every message, so alignment is real work for big recordings)."""
    from robodata.ingest.steps.episodes import settings_dict
    from robodata.ingest.workers.binpack import lpt_order
    from robodata.ingest.workers.dispatch import run_pool

    raw = paths.read("raw_episodes", batch, ["uri", "kind", "size_bytes"]).to_pylist()
    if settings.workers > 1 and len(raw) >= 4 * settings.workers:
        order = lpt_order([float(r["size_bytes"]) for r in raw], [r["uri"] for r in raw])
        rows = run_pool([raw[i] for i in order], settings.workers, settings_dict(settings), stage="align")
    else:
        rows = [{**align_one(r["uri"], r["kind"], settings), "size_bytes": r["size_bytes"]} for r in raw]
    for row in rows:
        row["batch"] = batch
    paths.replace("aligned_tracks", pa.Table.from_pylist(rows, ALIGNED_SCHEMA), batch)
    ok = [r for r in rows if r["ok"]]
    return {
        "episodes": len(rows),
        "aligned": len(ok),
        "unreadable": len(rows) - len(ok),
        "max_alignment_error_ms": round(max((r["alignment_error_ms"] for r in ok), default=0.0), 4),
    }
