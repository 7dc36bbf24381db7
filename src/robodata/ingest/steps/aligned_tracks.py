"""aligned_tracks stage: open every raw episode of a batch, align its clocks, record the result.

A read failure is a fact about that episode (error column, and `failed_check`: the pre-QC check
it fails), never an exception for the batch: `readable` for what cannot be read, `recognized` for
a landing entry no importer claims (robodata.ingest.landing.kinds), `names_safe`
for an unsafe id or stream name (robodata.names), `episode_id_unique` for a second recording
of an id already in the batch. Of the recordings sharing an id, the first by landing uri is
kept; the others are quarantined with the winner's uri in their reason, never converted.

For the formats whose alignment reads a recording whole (MCAP, ROS bags, RLDS, LeRobot), the worker that
aligned an episode also converts it, in that one read, into a staged container that the episodes
stage commits (robodata.ingest.steps.one_pass); `staged_json` carries that conversion's row.
"""

from __future__ import annotations

import pyarrow as pa

from robodata.errors import RobodataError
from robodata.ingest import formats
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import staged_raw
from robodata.ingest.landing.dedup import item_digest
from robodata.ingest.landing.kinds import unrecognized_reason
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps import one_pass
from robodata.ingest.tables import IngestPaths
from robodata.names import UnsafeNameError

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
        ("failed_check", pa.string()),  # "" when ok; else readable | recognized | names_safe | episode_id_unique
        ("source_digest", pa.string()),  # the item's content digest (robodata.ingest.landing.dedup)
        ("robot_type", pa.string()),  # as the source declares it, also for an item that cannot be read
        ("staged_json", pa.string()),  # the conversion made in this read (steps.one_pass); null: none
    ]
)


def _failed(uri: str, kind: str, error: str, check: str = "readable") -> dict:
    row = {"uri": uri, "kind": kind, "episode_id": "", "ok": False, "error": error, "failed_check": check}
    if formats.LEROBOT.holds(kind):  # info.json declares the embodiment even when an episode is unreadable
        from robodata.ingest.importers.lerobot_meta import declared_robot_type

        row["robot_type"] = declared_robot_type(uri)
    return row


def _digest(uri: str, kind: str, memo: dict[str, str]) -> str:
    if kind == formats.UNRECOGNIZED:
        return ""
    try:
        return item_digest(uri, kind, memo=memo)
    except (OSError, ValueError):  # unreadable: the alignment row says why
        return ""


def align_one(uri: str, kind: str, settings: IngestSettings, stage_to: str = "") -> dict:
    """The aligned_tracks row of one item; with `stage_to` (a one-pass format: steps.one_pass), the
    episode is also converted there in this read unless a blocking pre-conversion check fails."""
    if kind == formats.UNRECOGNIZED:  # listed so that it is a row with its reason; never staged or read
        return _failed(uri, kind, unrecognized_reason(uri), "recognized")
    staged = ""
    try:
        threads = settings.decode_threads if stage_to else 0
        with staged_raw(uri, kind, None, threads, settings.import_options) as raw:
            al = aligned_tracks(raw, settings.align, settings.qc.thresholds.rate_tolerance)
            if stage_to and not one_pass.blocked(al, raw, kind, settings):
                staged = one_pass.stage(raw, al, settings, stage_to)
    except UnsafeNameError as exc:
        return _failed(uri, kind, str(exc), "names_safe")
    except RobodataError as exc:
        return _failed(uri, kind, str(exc))
    except Exception as exc:  # an importer bug or an unexpected format: still one episode's problem
        return _failed(uri, kind, f"{type(exc).__name__}: {exc}")
    return {
        "uri": uri,
        "kind": kind,
        "episode_id": raw.episode_id,
        "source": raw.source,
        "vendor": raw.vendor,
        "robot": raw.robot,
        "site": raw.site,
        "task": raw.task,
        "robot_type": raw.robot_type,
        "ok": True,
        "error": "",
        "alignment_error_ms": al.alignment_error_ms,
        "assign_error_ms": al.assign_error_ms,
        "span_s": al.span_s,
        "alignment_json": al.to_json(),
        "decoded_bytes": decoded_bytes(raw),
        "failed_check": "",
        "staged_json": staged or None,
    }


def refuse_duplicate_ids(rows: list[dict], batch: str) -> int:
    """Keep the first recording of each episode_id by landing uri; mark the others failed
    (`episode_id_unique`, the kept uri in the reason). Ids that differ only in case count as one:
    their containers and exports would be one file on a case-insensitive file system. Returns
    how many were refused."""
    first: dict[str, tuple[str, str]] = {}
    refused = 0
    for r in sorted((r for r in rows if r["ok"]), key=lambda r: r["uri"]):
        ep = r["episode_id"]
        kept_uri, kept_id = first.setdefault(ep.casefold(), (r["uri"], ep))
        if kept_uri != r["uri"]:
            same = "has it too" if kept_id == ep else f"has {kept_id!r}, which differs only in case"
            why = (
                f"{r['uri']}: episode_id {ep!r} is not unique in batch {batch!r}: {kept_uri} {same} "
                "(the first recording by landing uri is kept; this one is quarantined, not converted)"
            )
            r.update(ok=False, error=why, failed_check="episode_id_unique", alignment_json=None)
            refused += 1
    return refused


def decoded_bytes(raw) -> int:
    return int(sum(len(c.t_ns) * c.height * c.width * 3 for c in raw.cameras.values()))


def align_batch(paths: IngestPaths, batch: str, settings: IngestSettings) -> dict:
    """Serial for small batches; otherwise the same worker processes as conversion (MCAP scans
    parse every message, so alignment is real work for big recordings, and the one-pass formats
    are converted here too: then any batch of several items goes to the pool)."""
    from robodata.ingest.workers.binpack import lpt_order
    from robodata.ingest.workers.dispatch import run_pool

    rows_in = paths.read("raw_episodes", batch).to_pylist()  # a table written before source_digest has none
    raw = [{k: r[k] for k in ("uri", "kind", "size_bytes")} for r in rows_in]
    for r in raw:
        r["stage_to"] = paths.staged_container(batch, r["uri"]) if one_pass.applies(r["kind"]) else ""
    handed = {r["uri"]: r.get("source_digest") for r in rows_in}  # the sensor's digests: not read again
    converting = sum(bool(r["stage_to"]) for r in raw)
    if settings.workers > 1 and (len(raw) >= 4 * settings.workers or converting > 1):
        order = lpt_order([float(r["size_bytes"]) for r in raw], [r["uri"] for r in raw])
        rows = run_pool([raw[i] for i in order], settings.workers, settings.to_dict(), stage="align")
    else:
        rows = [{**align_one(r["uri"], r["kind"], settings, r["stage_to"]), "size_bytes": r["size_bytes"]} for r in raw]
    memo: dict[str, str] = {}  # a file / store holding many episodes is read once for all of them
    for row in rows:
        row["source_digest"] = handed.get(row["uri"]) or _digest(row["uri"], row["kind"], memo)
    for row in rows:
        row["batch"] = batch
        row.setdefault("failed_check", "" if row["ok"] else "readable")  # a dead worker's row has none
    duplicates = refuse_duplicate_ids(rows, batch)
    for row in rows:
        if row.get("staged_json") and not row["ok"]:  # a refused duplicate: its staged conversion goes
            one_pass.discard(paths.staged_container(batch, row["uri"]))
            row["staged_json"] = None
    paths.replace("aligned_tracks", pa.Table.from_pylist(rows, ALIGNED_SCHEMA), batch)
    ok = [r for r in rows if r["ok"]]
    unrecognized = [r for r in rows if r["failed_check"] == "recognized"]
    return {
        "episodes": len(rows),
        "aligned": len(ok),
        "unreadable": len(rows) - len(ok) - duplicates - len(unrecognized),
        "duplicate_ids": duplicates,
        "unrecognized": len(unrecognized),
        "unrecognized_reasons": [r["error"] for r in unrecognized[:10]],
        "max_alignment_error_ms": round(max((r["alignment_error_ms"] for r in ok), default=0.0), 4),
    }
