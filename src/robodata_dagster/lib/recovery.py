"""Recovery cost of a retried training attempt, as `recovery/*` metadata (robodata.health.recovery)."""

from pathlib import Path

import dagster as dg

from robodata.errors import RobodataError


def recovery_metadata(
    context: dg.AssetExecutionContext,
    run_dir: Path,
    started_at: float,
    beat_before: int | None,
    resumed_from: str | None,
) -> dict:
    """`recovery/*` metadata of this attempt: the failed attempt's last step and end time come from
    its failure note in run_dir (step retry, or a run retry whose process lived to write it), else
    from the heartbeat and the parent run's record (a run retry after the process was killed)."""
    from robodata.health.recovery import PARENT_RUN_ID_TAG, RETRY_NUMBER_TAG, read_failure, recovery_cost

    tags = dict(context.run.tags)
    attempt = int(tags.get(RETRY_NUMBER_TAG, "0") or 0) + context.retry_number
    tags[RETRY_NUMBER_TAG] = str(attempt)
    note = read_failure(run_dir)
    last_step, ended_at = (note.last_step, note.ended_at) if note else (beat_before, None)
    if ended_at is None and tags.get(PARENT_RUN_ID_TAG):
        record = context.instance.get_run_record_by_id(tags[PARENT_RUN_ID_TAG])
        ended_at = record.end_time if record is not None else None
    resumed_step = int(Path(resumed_from).name.split("-")[1]) if resumed_from else None
    try:
        cost = recovery_cost(
            tags,
            start_time=started_at,
            parent_end_time=ended_at,
            last_step_before_failure=last_step if attempt else None,
            resumed_from_step=resumed_step,
        )
    except RobodataError as exc:  # bookkeeping only: never fail a finished training run over it
        context.log.warning(f"recovery cost not recorded: {exc}")
        return {"recovery/attempt": attempt, "recovery/error": str(exc)}
    if cost.is_retry:
        context.log.info(
            f"attempt {attempt} resumed from step {resumed_step}: {cost.lost_steps} steps lost, "
            f"restart latency {cost.restart_latency_s}s"
        )
    return cost.as_metadata()
