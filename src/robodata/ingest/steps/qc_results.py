"""QC stages: evaluate the selected checks per episode and record every outcome in qc_results.

Rows: (batch, uri, episode_id, stage, check, passed, blocking, reason, vendor, source).
stage = pre (on alignment) | post (on the container) | summary (one per episode: quarantined or not).
"""

from __future__ import annotations

import time

import pyarrow as pa

from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.ingest.align import AlignedTracks
from robodata.ingest.qc import IDENTITY_CHECKS, Outcome, QCSelection, evaluate_pre
from robodata.ingest.tables import IngestPaths

QC_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("uri", pa.string()),
        ("episode_id", pa.string()),
        ("stage", pa.string()),
        ("check", pa.string()),
        ("passed", pa.bool_()),
        ("blocking", pa.bool_()),
        ("reason", pa.string()),
        ("vendor", pa.string()),
        ("source", pa.string()),
        ("checked_at", pa.float64()),
        ("score", pa.float32()),  # summary rows: fraction of the episode's checks that passed
    ]
)


def _rows(batch: str, r: dict, stage: str, outcomes: list[Outcome], blocking: tuple[str, ...]) -> list[dict]:
    now = time.time()
    return [
        {
            "batch": batch,
            "uri": r["uri"],
            "episode_id": r.get("episode_id") or "",
            "stage": stage,
            "check": o.check,
            "passed": o.passed,
            "blocking": o.check in blocking,
            "reason": o.reason[:2000],
            "vendor": r.get("vendor") or "",
            "source": r.get("source") or r.get("kind") or "",
            "checked_at": now,
            "score": None,
        }
        for o in outcomes
    ]


def _summarize(rows: list[dict]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        c = out.setdefault(r["check"], {"evaluated": 0, "failed": 0, "episodes_quarantined": 0})
        c["evaluated"] += 1
        if not r["passed"]:
            c["failed"] += 1
            c["episodes_quarantined"] += int(r["blocking"])
    return out


def pre_qc(paths: IngestPaths, batch: str, sel: QCSelection) -> dict[str, dict[str, int]]:
    aligned = paths.read("aligned_tracks", batch).to_pylist()
    rows = []
    blocking = (*sel.blocking, *IDENTITY_CHECKS)
    for r in aligned:
        al = AlignedTracks.from_json(r["alignment_json"]) if r["ok"] else None
        names = sel.checks_for(r.get("vendor") or "", r.get("source") or r["kind"])
        outcomes = evaluate_pre(al, r["error"] or "", names, sel.thresholds, r.get("failed_check") or "")
        rows += _rows(batch, r, "pre", outcomes, blocking)
    paths.replace("qc_results", pa.Table.from_pylist(rows, QC_SCHEMA), batch, where={"stage": "pre"})
    return _summarize(rows)


def _decodable(uri: str, storage_options: dict) -> tuple[bool, str, float]:
    """Open the container and decode the first and last frames of every camera."""
    try:
        r = EpisodeReader.open(uri, **storage_options)
        cams = [s for s, spec in r.meta.streams.items() if spec.kind == "video"]
        dur = r.meta.duration_s
        for lo, hi in ((0.0, 0.2), (max(0.0, dur - 0.2), dur + 0.01)):
            win = r.read_window(lo, hi, cams)
            empty = [c for c in cams if len(win[c].data) == 0]
            if empty:
                return False, f"no frames decoded in [{lo:.2f}, {hi:.2f}] s for {empty}", dur
        return True, "", dur
    except RobodataError as exc:
        return False, str(exc), 0.0
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}", 0.0


def post_qc(paths: IngestPaths, batch: str, sel: QCSelection) -> dict[str, dict[str, int]]:
    aligned = {r["uri"]: r for r in paths.read("aligned_tracks", batch).to_pylist()}
    conv = paths.read("conversions", batch).to_pylist() if paths.has("conversions") else []
    rows = []
    for c in conv:
        a = aligned.get(c["uri"], {})
        names = sel.checks_for(a.get("vendor") or "", a.get("source") or a.get("kind") or "")
        out = [Outcome("converted", bool(c["ok"]), "" if c["ok"] else c["error"] or "conversion failed")]
        if c["ok"]:
            dur = c["duration_s"]
            if "video_decodable" in names:
                ok, why, dur = _decodable(c["container_uri"], paths.fsspec_options())
                out.append(Outcome("video_decodable", ok, why))
            if "duration_consistent" in names:
                span = float(a.get("span_s") or 0.0)
                tol = sel.thresholds.duration_tolerance_s
                ok = abs(dur - span) <= tol
                out.append(
                    Outcome(
                        "duration_consistent", ok, "" if ok else f"container {dur:.2f} s vs aligned span {span:.2f} s"
                    )
                )
        rows += _rows(batch, {**a, **c}, "post", out, sel.blocking)
    paths.replace("qc_results", pa.Table.from_pylist(rows, QC_SCHEMA), batch, where={"stage": "post"})
    return _summarize(rows)


def qc_rollup(paths: IngestPaths, batch: str) -> dict:
    """One summary row per episode: passed = no blocking check failed in any stage."""
    t = paths.read("qc_results", batch)
    per: dict[str, dict] = {}
    for r in t.to_pylist():
        if r["stage"] == "summary":
            continue
        e = per.setdefault(r["uri"], {"row": r, "fail": [], "warn": [], "n": 0, "passed": 0})
        e["n"] += 1
        e["passed"] += int(r["passed"])
        if r["episode_id"]:
            e["row"] = r
        if not r["passed"]:
            (e["fail"] if r["blocking"] else e["warn"]).append(f"{r['check']}: {r['reason']}")
    rows = []
    for e in per.values():
        reason = "; ".join(e["fail"]) if e["fail"] else ("warnings: " + "; ".join(e["warn"]) if e["warn"] else "")
        score = e["passed"] / e["n"] if e["n"] else 0.0
        rows += _rows(batch, e["row"], "summary", [Outcome("status", not e["fail"], reason)], ("status",))
        rows[-1]["score"] = score
    paths.replace("qc_results", pa.Table.from_pylist(rows, QC_SCHEMA), batch, where={"stage": "summary"})
    bad = [r for r in rows if not r["passed"]]
    return {
        "episodes": len(rows),
        "passed": len(rows) - len(bad),
        "quarantined": len(bad),
        "quarantine_reasons": [f"{r['episode_id'] or r['uri']}: {r['reason']}" for r in bad[:10]],
    }
