import pytest

from robodata.errors import ConfigError
from robodata.ingest.stagger import StaggerPolicy, due_count, launch_offsets, max_in_window


def test_offsets_sorted_and_spread_over_slots():
    p = StaggerPolicy(max_concurrent=10, run_s=5.0, jitter=0.9, seed=3)
    offs = launch_offsets(200, p)
    assert len(offs) == 200
    assert offs == sorted(offs)
    for i, t in enumerate(offs):  # launch i stays inside its own slot
        assert i * p.slot_s <= t < (i + 1) * p.slot_s
    assert offs[-1] >= p.span_s(200)
    assert max_in_window(offs, p.run_s) <= p.max_concurrent + 1


def test_jitter_is_seeded_and_zero_jitter_is_even():
    p = StaggerPolicy(max_concurrent=4, run_s=2.0, jitter=0.5, seed=1)
    assert launch_offsets(50, p) == launch_offsets(50, p)
    assert launch_offsets(50, p) != launch_offsets(50, StaggerPolicy(4, 2.0, 0.5, seed=2))
    even = launch_offsets(5, StaggerPolicy(max_concurrent=4, run_s=2.0, jitter=0.0))
    assert even == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_due_count_tracks_elapsed_time():
    offs = launch_offsets(9, StaggerPolicy(max_concurrent=3, run_s=3.0, jitter=0.0))
    assert [due_count(offs, t) for t in (-1, 0, 0.5, 1.0, 4.0, 100)] == [0, 1, 1, 2, 5, 9]
    assert launch_offsets(0, StaggerPolicy()) == []


def test_unstaggered_burst_is_detected():
    assert max_in_window([0.0] * 50, 1.0) == 50


@pytest.mark.parametrize("kw", [{"max_concurrent": 0}, {"run_s": -1.0}, {"jitter": 1.0}, {"jitter": -0.1}])
def test_bad_policy_is_a_config_error(kw):
    with pytest.raises(ConfigError):
        StaggerPolicy(**kw)


def test_negative_count_rejected():
    with pytest.raises(ConfigError):
        launch_offsets(-1, StaggerPolicy())
