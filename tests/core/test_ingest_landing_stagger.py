import pytest

from robodata.errors import ConfigError
from robodata.ingest.landing.stagger import StaggerPolicy, due_count, launch_offsets, max_in_window


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


def test_staggered_launch_resumes_from_its_state():
    from robodata.ingest.landing.stagger import StaggeredLaunch
    from robodata.stateful import Stateful

    p = StaggerPolicy(max_concurrent=4, run_s=2.0, jitter=0.0)  # one launch per 0.5 s
    wave = StaggeredLaunch(10, p, started_at=100.0)
    assert isinstance(wave, Stateful)
    assert wave.take(100.0) == 1 and wave.take(100.0) == 0 and wave.take(101.1) == 2
    state = wave.state_dict()
    resumed = StaggeredLaunch(0, StaggerPolicy(), started_at=0.0)
    resumed.load_state_dict(state)
    assert resumed.launched == 3 and not resumed.done
    assert resumed.take(1000.0) == 7 and resumed.done and resumed.take(2000.0) == 0
    bad = dict(state, launched=11)
    with pytest.raises(ConfigError):
        resumed.load_state_dict(bad)
