"""episode_metadata stage: one catalog row per episode (robodata.catalog.schema.CATALOG_SCHEMA).

Rows are built from container footers only (one small range read each, never video), the
conversion record and the QC summary, then merged into the catalog Delta table keyed by
episode_id. Quarantined episodes get a row too (qc_status = quarantined) so they can be found.

An item refused while read (unreadable, unsafe name, duplicate id) has no id it can be trusted
with: its row is keyed by its landing id (`landing_id`: its file or folder name without the
format's suffix, and its episode within a dataset, as a safe name: never a path), which is the id
the importers give a recording that names none; one that collides with another row of the batch
gets the landing uri's hash appended. When the same landing item is ingested whole later, its
row replaces the quarantine row: by the merge when the ids are equal, else the merge deletes the
quarantine row in the same commit (`supersede`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import UTC, datetime

import pyarrow as pa

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.catalog.table import merge_episodes
from robodata.container import EpisodeReader
from robodata.container.roles import stream_roles
from robodata.errors import RobodataError
from robodata.ingest.steps.retention import current_uris, delete_superseded
from robodata.ingest.tables import IngestPaths
from robodata.names import MAX_NAME

ID_SUFFIXES = (".mcap", ".bag", ".hdf5", ".h5", ".zarr")  # what the importers strip from a name


def landing_id(uri: str) -> str:
    """The id a landing item is known by before it is read (see the module docstring)."""
    base, _, fragment = uri.partition("#")
    name = base.rstrip("/").rsplit("/", 1)[-1]
    stem, suffix = os.path.splitext(name)
    name = stem if suffix.lower() in ID_SUFFIXES else name
    if fragment:
        part = fragment.rsplit("/", 1)[-1]
        name += "-" + (f"{int(part):06d}" if part.isdigit() else part)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-")[:MAX_NAME]
    return safe or "entry-" + hashlib.sha256(uri.encode()).hexdigest()[:12]


def _row_from_container(paths: IngestPaths, c: dict, batch: str) -> dict:
    r = EpisodeReader.open(
        c["container_uri"], footer_offset=c["footer_offset"], footer_length=c["footer_length"], **paths.fsspec_options()
    )
    return container_row(r, c["container_uri"], batch)


def container_row(r: EpisodeReader, uri: str, batch: str) -> dict:
    """The catalog row of an open container at `uri` (the columns its footer gives: not the QC facts)."""
    m = r.meta
    start = datetime.fromtimestamp(m.start_time_ns / 1e9, tz=UTC)
    cams = [s for s, spec in m.streams.items() if spec.kind == "video"]
    arrays = [s for s, spec in m.streams.items() if spec.kind == "array"]
    # the state / action streams as the source declared them, else as their names declare them
    # (robodata.container.roles); the step count follows the first array stream where none is the state
    roles = stream_roles(m.streams, m.extra)
    main = roles.state or (arrays[0] if arrays else "")
    counts: dict[str, int] = {}
    for ch in r.chunks:
        for p in ch.parts:
            counts[p.stream] = counts.get(p.stream, 0) + p.count
    success = m.extra.get("success")
    state = m.streams.get(roles.state)
    action = m.streams.get(roles.action)
    return {
        "episode_id": m.episode_id,
        "uri": uri,
        "site": m.site,
        "robot": m.robot,
        "task": m.task,
        "vendor": m.vendor,
        "start_time": start,
        "day": start.strftime("%Y-%m-%d"),
        "duration_s": float(m.duration_s),
        "num_frames": min((counts.get(s, 0) for s in cams), default=0),
        "num_state_steps": counts.get(main, 0),
        "cameras": cams,
        "streams": sorted(m.streams),
        "stream_rates_json": json.dumps(
            {s: spec.rate_hz for s, spec in m.streams.items() if spec.kind != "events"}, sort_keys=True
        ),
        "success": bool(success) if success is not None else None,
        "layout_version": r.layout_version,
        "ingest_batch": batch,
        "size_bytes": int(r.source.size()),
        "footer_offset": r.footer_offset,
        "footer_length": r.footer_length,
        "robot_type": str(m.extra.get("robot_type") or ""),
        "source_format": str(m.extra.get("source") or ""),
        "source_dataset": str(m.extra.get("source_dataset") or ""),
        "state_dim": int(state.shape[0]) if state is not None and state.shape else None,
        "action_dim": int(action.shape[0]) if action is not None and action.shape else None,
        "state_names": list(state.names) if state is not None else [],
        "action_names": list(action.names) if action is not None else [],
        # null where no source gave the rate (the steps were laid on a nominal grid: rate_declared fails)
        "control_hz": float(state.rate_hz)
        if state is not None and state.rate_hz and not m.extra.get("rate_unknown")
        else None,
        "language": str(m.extra.get("language") or ""),
        "video_json": json.dumps(m.extra.get("video") or {}, sort_keys=True),
        "state_stream": roles.state,
        "action_stream": roles.action,
        "camera_roles": roles.camera_roles(cams),
    }


def _row_from_alignment(a: dict, batch: str, taken: set[str]) -> dict:
    # An item refused while read (unreadable, unsafe name, duplicate id) is keyed by its landing
    # id: its own id, if any, is not trusted and may belong to the recording the batch kept.
    eid = a["episode_id"] if a["ok"] else ""
    if not eid:
        eid = landing_id(a["uri"])
        if eid in taken:
            eid = f"{eid[: MAX_NAME - 13]}.{hashlib.sha256(a['uri'].encode()).hexdigest()[:12]}"
    return {
        "episode_id": eid,
        "uri": "",
        "site": a.get("site") or "",
        "robot": a.get("robot") or "",
        "task": a.get("task") or "",
        "vendor": a.get("vendor") or "",
        "start_time": None,
        "day": "",
        "duration_s": float(a.get("span_s") or 0.0),
        "num_frames": 0,
        "num_state_steps": 0,
        "cameras": [],
        "streams": [],
        "stream_rates_json": "{}",
        "success": None,
        "layout_version": "",
        "ingest_batch": batch,
        "size_bytes": 0,
        "footer_offset": 0,
        "footer_length": 0,
        "robot_type": a.get("robot_type") or "",  # as the source declares it (LeRobot info.json), quarantined or not
        "source_format": a.get("source") or a.get("kind") or "",
        "source_dataset": "",
        "state_dim": None,
        "action_dim": None,
        "state_names": None,
        "action_names": None,
        "control_hz": None,
        "language": "",
        "video_json": "{}",
        "state_stream": "",
        "action_stream": "",
        "camera_roles": [],
    }


def failed_checks(qc_rows: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """uri -> [(check, reason)] of every failed pre / post check (blocking or not), in check order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for q in qc_rows:
        if q["stage"] != "summary" and not q["passed"]:
            out.setdefault(q["uri"], []).append((q["check"], q["reason"] or ""))
    return out


def qc_facts(failed: list[tuple[str, str]]) -> dict:
    """The catalog's qc_failed / qc_reason of one episode."""
    names = list(dict.fromkeys(c for c, _ in failed))
    return {"qc_failed": names, "qc_reason": "; ".join(f"{c}: {r}" if r else c for c, r in failed)[:4000]}


def metadata_batch(paths: IngestPaths, batch: str) -> dict:
    status = {}
    failed: dict[str, list[tuple[str, str]]] = {}
    if paths.has("qc_results"):
        qc_rows = paths.read("qc_results", batch).to_pylist()
        failed = failed_checks(qc_rows)
        for q in qc_rows:
            if q["stage"] == "summary":
                status[q["uri"]] = q
    conv = {c["uri"]: c for c in paths.read("conversions", batch).to_pylist()} if paths.has("conversions") else {}
    aligned = paths.read("aligned_tracks", batch).to_pylist()
    taken = {a["episode_id"] for a in aligned if a["ok"] and a["episode_id"]}
    rows, errors = [], []
    for a in aligned:
        c = conv.get(a["uri"])
        q = status.get(a["uri"])
        try:
            row = _row_from_container(paths, c, batch) if c and c["ok"] else _row_from_alignment(a, batch, taken)
        except RobodataError as exc:  # container vanished / corrupt since conversion: quarantine it
            row, q = _row_from_alignment(a, batch, taken), {"passed": False, "score": 0.0}
            errors.append(f"{a['uri']}: {exc}")
            failed.setdefault(a["uri"], []).append(("converted", f"container unreadable: {exc}"))
        passed = bool(q["passed"]) if q else bool(c and c["ok"])
        row["qc_status"] = "pass" if passed and c and c["ok"] else "quarantined"
        fails = failed.get(a["uri"], [])
        if row["qc_status"] == "quarantined" and not fails:
            fails = [("converted", (c or {}).get("error") or "not converted")]
        row.update(qc_facts(fails))
        row["source_digest"] = a.get("source_digest") or None
        row["quality_score"] = float(q["score"]) if q and q["score"] is not None else (1.0 if passed else 0.0)
        taken.add(row["episode_id"])
        rows.append(row)
    table = pa.Table.from_pylist(rows, CATALOG_SCHEMA)
    before = current_uris(paths, [r["episode_id"] for r in rows])
    # quarantine rows of these items (under their landing ids) that the good rows replace
    supersede = sorted(
        {landing_id(a["uri"]) for a, r in zip(aligned, rows, strict=True) if r["uri"]} - {r["episode_id"] for r in rows}
    )
    stats = (
        merge_episodes(paths.catalog, table, storage_options=paths.delta_options(), supersede=supersede) if rows else {}
    )
    superseded = delete_superseded(paths, before) if rows else []  # only after the commit
    n_pass = sum(r["qc_status"] == "pass" for r in rows)
    return {
        "rows": len(rows),
        "pass": n_pass,
        "quarantined": len(rows) - n_pass,
        "catalog": paths.catalog,
        "inserted": stats.get("inserted", 0),
        "updated": stats.get("updated", 0),
        "moved": stats.get("moved", 0),
        "not_demoted": stats.get("not_demoted", 0),
        "superseded_deleted": len(superseded),
        "errors": errors[:10],
    }
