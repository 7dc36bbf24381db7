"""QC as asset checks: before conversion on aligned_tracks, after it on episodes.

Which checks apply per vendor / source and which quarantine an episode is run config (the
`ingest` resource), not processing code. A failing check quarantines the episodes it failed
(recorded in qc_results with the reason); the check itself fails, and blocks downstream
steps, only when the batch as a whole is broken: at least BROKEN_MIN episodes and none passed
(a systemic fault such as a wrong clock config, not bad luck with a few recordings).
"""

import dagster as dg

from robodata.ingest.qc import POST_CHECKS, PRE_CHECKS
from robodata.ingest.steps.qc_results import post_qc, pre_qc
from robodata_dagster.defs.ingest.partitions import batch_key
from robodata_dagster.defs.ingest.resources import IngestResource
from robodata_dagster.lib import steps

BROKEN_MIN = 10


def _results(summary: dict, names, asset: str) -> list[dg.AssetCheckResult]:
    out = []
    for n in names:
        s = summary.get(n, {"evaluated": 0, "failed": 0, "episodes_quarantined": 0})
        broken = s["evaluated"] >= BROKEN_MIN and s["failed"] == s["evaluated"]
        out.append(
            dg.AssetCheckResult(
                check_name=n,
                asset_key=dg.AssetKey(asset),
                passed=s["failed"] == 0,
                severity=dg.AssetCheckSeverity.ERROR if broken else dg.AssetCheckSeverity.WARN,
                metadata={"evaluated": s["evaluated"], "failed": s["failed"], "quarantined": s["episodes_quarantined"]},
            )
        )
    return out


@steps.multi_asset_check(
    "light",
    specs=[dg.AssetCheckSpec(n, asset="aligned_tracks", blocking=True) for n in PRE_CHECKS],
    name="qc_pre_conversion",
)
def qc_pre_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    summary = pre_qc(ingest.paths(), batch_key(context), ingest.settings().qc)
    yield from _results(summary, PRE_CHECKS, "aligned_tracks")


@steps.multi_asset_check(
    "encode",
    specs=[dg.AssetCheckSpec(n, asset="episodes", blocking=True) for n in POST_CHECKS],
    name="qc_post_conversion",
)
def qc_post_conversion(context: dg.AssetCheckExecutionContext, ingest: IngestResource):
    summary = post_qc(ingest.paths(), batch_key(context), ingest.settings().qc)
    yield from _results(summary, POST_CHECKS, "episodes")
