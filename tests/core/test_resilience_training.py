"""Training fault injection (bench.resilience_training on a tiny 2 x 2 CPU/gloo run): one rank
SIGKILLed mid-training fails the launcher fast and a rerun resumes to the uninterrupted result;
a corrupted newest checkpoint is skipped by its CRC and the previous one is resumed."""

from __future__ import annotations

import json

import pytest

from bench import resilience_training as rt

pytestmark = pytest.mark.timeout(300)


def test_killing_one_rank_fails_the_launcher_fast_and_a_rerun_resumes_to_the_reference(tmp_path):
    res = rt.kill_training_worker(tmp_path, quick=True)
    assert res.survived, res.detail
    assert res.data_lost == 0
    assert res.metrics["detect_s"] < 30  # failed, not hung until the collective timeout (60 s)
    assert 0 < res.metrics["lost_steps"] <= rt.INTERVAL
    assert res.metrics["max_param_diff"] <= 1e-6
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["resumed_from"].endswith(f"step-{rt.INTERVAL:08d}") and result["complete"]


def test_a_corrupted_newest_checkpoint_is_skipped_and_the_previous_one_resumed(tmp_path):
    res = rt.corrupt_newest_checkpoint(tmp_path, quick=True)
    assert res.survived, res.detail
    assert res.data_lost == 0 and res.metrics["max_param_diff"] <= 1e-6
    # the corrupted step was trained again and replaced by an intact checkpoint
    assert f"step-{2 * rt.INTERVAL:08d}" in rt.usable_checkpoints(tmp_path / "run")


def test_rank_pids_ignores_non_python_children_and_times_out(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    flag = tmp_path / "started"
    helper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; subprocess.Popen(['sleep','30']);"
            " open(sys.argv[1], 'w').close(); time.sleep(30)",
            str(flag),
        ],
        start_new_session=True,
    )
    try:
        while not flag.exists():
            time.sleep(0.01)
        assert len(rt.children(helper.pid)) == 1  # the `sleep`: not a rank
        with pytest.raises(RuntimeError, match="did not start 1 ranks"):
            rt.rank_pids(helper.pid, 1, timeout=0.5)
    finally:
        os.killpg(helper.pid, signal.SIGKILL)
        helper.wait()
