import pytest

from robodata.errors import RobodataError
from robodata.health.recovery import recovery_cost


def test_first_run_costs_nothing():
    cost = recovery_cost({}, start_time=100.0, last_step_before_failure=None)
    assert not cost.is_retry and cost.as_metadata() == {"recovery/attempt": 0, "recovery/lost_steps": 0}


def test_retry_records_lost_steps_and_restart_latency():
    tags = {"dagster/retry_number": "2", "dagster/parent_run_id": "p", "dagster/root_run_id": "r"}
    cost = recovery_cost(
        tags, start_time=1_000.0, parent_end_time=955.5, last_step_before_failure=1430, resumed_from_step=1400
    )
    assert cost.lost_steps == 30 and cost.restart_latency_s == pytest.approx(44.5)
    md = cost.as_metadata()
    assert md["recovery/parent_run_id"] == "p" and md["recovery/resumed_from_step"] == 1400
    scratch = recovery_cost(tags, start_time=1.0, last_step_before_failure=50)  # no checkpoint: all lost
    assert scratch.lost_steps == 50


def test_bad_inputs_are_clear_errors():
    with pytest.raises(RobodataError, match="not an integer"):
        recovery_cost({"dagster/retry_number": "x"}, start_time=0)
    with pytest.raises(RobodataError, match="not from the failed attempt"):
        recovery_cost({"dagster/retry_number": "1"}, start_time=0, last_step_before_failure=10, resumed_from_step=20)


def test_failure_note_round_trips_and_a_broken_one_is_a_clear_error(tmp_path):
    from robodata.health.recovery import FAILURE_NOTE, clear_failure, note_failure, read_failure

    assert read_failure(tmp_path) is None
    note_failure(tmp_path, 7, "rank 1 died", ended_at=123.5)
    note = read_failure(tmp_path)
    assert (note.last_step, note.ended_at, note.error) == (7, 123.5, "rank 1 died")
    note_failure(tmp_path, None, "never trained")
    assert read_failure(tmp_path).last_step is None
    (tmp_path / FAILURE_NOTE).write_text("{not json")
    with pytest.raises(RobodataError, match="unreadable failure note"):
        read_failure(tmp_path)
    clear_failure(tmp_path)
    clear_failure(tmp_path)  # idempotent
    assert read_failure(tmp_path) is None
