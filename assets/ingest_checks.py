"""QC as asset checks: before conversion on aligned_tracks, after it on episodes, per batch partition.

Which checks apply per vendor / source and which quarantine an episode is run config (the
`ingest` resource's qc.blocking), not processing code. Severity says what a check did:
- a check that quarantines (qc.blocking) and failed episodes: they are quarantined (rows in
  qc_results with the reason), the result fails with WARN, and the batch goes on; only when the
  batch as a whole is broken (at least BROKEN_MIN episodes and none passed: a systemic fault such as
  a wrong clock config) is it ERROR, which stops the batch's downstream steps. Such checks are
  declared `blocking` (the default quarantining set, DEFAULT_BLOCKING).
- a report-only check never quarantines, is not blocking, and fails with WARN only.
Each failed check shows the first REASONS_SHOWN episodes it failed, with their reasons (the UI's
asset check view); all of them are rows in qc_results.

The checks are partitioned like their assets (by batch): each evaluation is recorded for its batch,
so a batch's failed check stays failed when the next batch passes (the UI shows the status per
partition; the instance answers per partition, `partition_filter`).
"""

import warnings
from typing import TYPE_CHECKING

import dagster as dg

from robodata.ingest.qc import DEFAULT_BLOCKING, POST_CHECKS, PRE_CHECKS
from robodata_dagster.assets.partitions import INGEST_BATCH, batch_key
from robodata_dagster.lib import steps
from robodata_dagster.resources.ingest import IngestResource

if TYPE_CHECKING:
    from robodata.ingest.tables import IngestPaths

BROKEN_MIN = 10
REASONS_SHOWN = 5
# What each check asks of an episode (the check's description in the UI).
CHECK_DESCRIPTIONS = {
    "readable": "The recording opens and its streams decode (importer ran without error).",
    "recognized": "Some importer claims the landing entry (else an `unrecognized` row with its guessed kind).",
    "names_safe": "Every name read from the recording (episode id, streams) is a safe, confined name.",
    "episode_id_unique": "No other episode of the batch has the same id (case-insensitively).",
    "topics_known": "Every topic maps to a stream through the topic rules (or is reported).",
    "timestamps_monotonic": "Each stream's timestamps never go backwards.",
    "rate_within_tolerance": "Each stream's measured rate is within the tolerance of its declared rate.",
    "no_frame_gaps": "No gap longer than max_gap_periods sample periods in any stream.",
    "clock_continuous": (
        "No clock jump is left in any stream (a jump of more than jump_periods sample periods that the "
        "aligner did not re-base from the other streams)."
    ),
    "joints_in_range": "Joint positions are finite and, where declared in radians, within the configured bound.",
    "units_declared": "Joint positions have declared units (else their range is not checked); non-blocking.",
    "frames_match_state": "A LeRobot episode has as many video frames as parquet rows; non-blocking.",
    "episode_framed": "An RLDS episode's is_first / is_last flags frame it (else framed by the record); non-blocking.",
    "rate_declared": "Some source (the file, a key map) declares the control rate; non-blocking.",
    "clock_aligned": "Clock fits put every stream on one timeline within max_clock_error_ms.",
    "min_duration": "The episode spans at least min_duration_s seconds.",
    "converted": "The episode was written to a container.",
    "video_decodable": "Every video stream of the container decodes.",
    "duration_consistent": "The container's duration matches the aligned span.",
}


def failure_reasons(paths: "IngestPaths", batch: str, stage: str) -> dict[str, list[str]]:
    """check -> the first REASONS_SHOWN "<episode>: <reason>" it failed in this batch and stage."""
    if not paths.has("qc_results"):
        return {}
    rows = paths.read("qc_results", batch, columns=["stage", "check", "passed", "episode_id", "uri", "reason"])
    out: dict[str, list[str]] = {}
    for r in rows.to_pylist():
        if r["stage"] == stage and not r["passed"]:
            shown = out.setdefault(r["check"], [])
            if len(shown) < REASONS_SHOWN:
                shown.append(f"{r['episode_id'] or r['uri'].rsplit('/', 1)[-1]}: {r['reason']}")
    return out


def _spec(name: str, asset: str) -> dg.AssetCheckSpec:
    # partitions_def on a check is a preview API in Dagster 1.13: the one place the layer opts into
    # it, knowingly (per-batch QC status; tests/platform/test_ingest_assets.py checks it holds).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name,
            asset=asset,
            blocking=name in DEFAULT_BLOCKING,
            description=CHECK_DESCRIPTIONS.get(name),
            partitions_def=INGEST_BATCH,
        )


def _results(
    summary: dict, names, asset: str, reasons: dict[str, list[str]], quarantining: tuple[str, ...], batch: str
) -> list[dg.AssetCheckResult]:
    out = []
    for n in names:
        s = summary.get(n, {"evaluated": 0, "failed": 0, "episodes_quarantined": 0})
        broken = n in quarantining and s["evaluated"] >= BROKEN_MIN and s["failed"] == s["evaluated"]
        md: dict = {
            "batch": batch,
            "evaluated": s["evaluated"],
            "failed": s["failed"],
            "quarantined": s["episodes_quarantined"],
            "quarantines": n in quarantining,
        }
        shown = reasons.get(n, [])
        if shown:
            md["quarantine_reasons"] = dg.MetadataValue.text("\n".join(shown))
        out.append(
            dg.AssetCheckResult(
                check_name=n,
                asset_key=dg.AssetKey(asset),
                passed=s["failed"] == 0,
                severity=dg.AssetCheckSeverity.ERROR if broken else dg.AssetCheckSeverity.WARN,
                metadata=md,
                description=f"{s['failed']} of {s['evaluated']} failed; first: {shown[0]}" if shown else None,
            )
        )
    return out


@steps.multi_asset_check(
    "light",
    specs=[_spec(n, "aligned_tracks") for n in PRE_CHECKS],
    name="qc_pre_conversion",
)
def qc_pre_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    from robodata.ingest.steps.qc_results import pre_qc

    paths, batch = ingest.paths(), batch_key(context)
    qc = ingest.settings().qc
    summary = pre_qc(paths, batch, qc)
    reasons = failure_reasons(paths, batch, "pre")
    yield from _results(summary, PRE_CHECKS, "aligned_tracks", reasons, tuple(qc.blocking), batch)


@steps.multi_asset_check(
    "encode",
    specs=[_spec(n, "episodes") for n in POST_CHECKS],
    name="qc_post_conversion",
)
def qc_post_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    from robodata.ingest.steps.qc_results import post_qc

    paths, batch = ingest.paths(), batch_key(context)
    qc = ingest.settings().qc
    summary = post_qc(paths, batch, qc)
    reasons = failure_reasons(paths, batch, "post")
    yield from _results(summary, POST_CHECKS, "episodes", reasons, tuple(qc.blocking), batch)
