"""QC as asset checks: before conversion on aligned_tracks, after it on episodes.

Which checks apply per vendor / source and which quarantine an episode is run config (the
`ingest` resource), not processing code. A failing check quarantines the episodes it failed
(recorded in qc_results with the reason); the check itself fails, and blocks downstream
steps, only when the batch as a whole is broken: at least BROKEN_MIN episodes and none passed
(a systemic fault such as a wrong clock config, not bad luck with a few recordings).
Each failed check shows the first REASONS_SHOWN episodes it failed, with their reasons (the UI's
asset check view); all of them are rows in qc_results.
"""

import dagster as dg
from robodata_dagster.assets.partitions import batch_key
from robodata_dagster.resources.ingest import IngestResource

from robodata.ingest.qc import POST_CHECKS, PRE_CHECKS
from robodata.ingest.steps.qc_results import post_qc, pre_qc
from robodata.ingest.tables import IngestPaths
from robodata_dagster.lib import steps

BROKEN_MIN = 10
REASONS_SHOWN = 5


def failure_reasons(paths: IngestPaths, batch: str, stage: str) -> dict[str, list[str]]:
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


def _results(summary: dict, names, asset: str, reasons: dict[str, list[str]]) -> list[dg.AssetCheckResult]:
    out = []
    for n in names:
        s = summary.get(n, {"evaluated": 0, "failed": 0, "episodes_quarantined": 0})
        broken = s["evaluated"] >= BROKEN_MIN and s["failed"] == s["evaluated"]
        md: dict = {"evaluated": s["evaluated"], "failed": s["failed"], "quarantined": s["episodes_quarantined"]}
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
    specs=[dg.AssetCheckSpec(n, asset="aligned_tracks", blocking=True) for n in PRE_CHECKS],
    name="qc_pre_conversion",
)
def qc_pre_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    paths, batch = ingest.paths(), batch_key(context)
    summary = pre_qc(paths, batch, ingest.settings().qc)
    yield from _results(summary, PRE_CHECKS, "aligned_tracks", failure_reasons(paths, batch, "pre"))


@steps.multi_asset_check(
    "encode",
    specs=[dg.AssetCheckSpec(n, asset="episodes", blocking=True) for n in POST_CHECKS],
    name="qc_post_conversion",
)
def qc_post_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    paths, batch = ingest.paths(), batch_key(context)
    summary = post_qc(paths, batch, ingest.settings().qc)
    yield from _results(summary, POST_CHECKS, "episodes", failure_reasons(paths, batch, "post"))
