"""Catalog compaction: daily Z-order + compaction of the recent days merges touched.

Merges leave small files in the days they touch; this folds them back into
`delta.targetFileSize` files Z-ordered by (site, task, robot) and writes a checkpoint,
so selective queries keep skipping data. Only the last `days` days are rewritten:
older days are not touched by ingestion and stay as compacted.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from resources.catalog import CatalogResource


class CompactConfig(dg.Config):
    days: int = 3


@dg.op(description="Compact and Z-order the catalog's most recent days.")
def compact_recent_days(context: dg.OpExecutionContext, config: CompactConfig, catalog: CatalogResource) -> None:
    cat = catalog.catalog()
    if not cat.exists():
        context.log.info(f"no catalog at {cat.uri} yet; nothing to compact")
        return
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=k)).isoformat() for k in range(config.days)]
    metrics = cat.optimize(days=days)
    context.add_output_metadata(
        {
            "days": days,
            "files_added": metrics.get("numFilesAdded", 0),
            "files_removed": metrics.get("numFilesRemoved", 0),
        }
    )


@dg.job(description="Daily catalog compaction (see jobs/catalog_maintenance.py).")
def catalog_compaction():
    compact_recent_days()


catalog_compaction_schedule = dg.ScheduleDefinition(job=catalog_compaction, cron_schedule="30 3 * * *")
