"""When the housekeeping jobs run (UTC)."""

import dagster as dg

event_log_cleanup_schedule = dg.ScheduleDefinition(
    name="event_log_cleanup_daily",
    job_name="event_log_cleanup",
    cron_schedule="17 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)

catalog_compaction_schedule = dg.ScheduleDefinition(
    name="catalog_compaction_schedule",
    job_name="catalog_compaction",
    cron_schedule="30 3 * * *",
    execution_timezone="UTC",
)
