"""Training on 4 CPU processes as 2 nodes x 2 (gloo): HSDP sharding, SIGKILL + resume
(bitwise), resume on another world size, corrupted/partial checkpoints skipped, lineage."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from robodata.cli import app
from robodata.train.checkpoint import complete_checkpoints, load_full_tensors

pytestmark = pytest.mark.timeout(400)

TINY = {
    "steps": 16,
    "global_batch_size": 8,
    "log_every": 4,
    "topology": {"nodes": 2, "gpus_per_node": 2, "timeout_s": 120},
    "data": {"episodes": 48, "image_size": 16},
    "model": {"channels": [8, 8], "latent_dim": 16, "hidden_dim": 32},
    "checkpoint": {"every_steps": 4, "keep": 10},
}


def tiny_config(run_dir: Path, **overrides) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg["run_dir"] = str(run_dir)
    for key, value in overrides.items():
        node = cfg
        *parents, leaf = key.split("__")
        for k in parents:
            node = node.setdefault(k, {})
        node[leaf] = value
    return cfg


def start(cfg: dict, where: Path) -> subprocess.Popen:
    """`python -m robodata.train.launch CONFIG` in its own process group (killpg kills all ranks)."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "robodata.train.launch", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def run(cfg: dict, where: Path, timeout: float = 240) -> str:
    proc = start(cfg, where)
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted 2x2 run of 16 steps, checkpoints every 4."""
    where = tmp_path_factory.mktemp("train_ref")
    run(tiny_config(where / "run"), where)
    return where / "run"


def final_state(run_dir: Path, prefix: str = "model.") -> dict[str, torch.Tensor]:
    return load_full_tensors(complete_checkpoints(run_dir / "checkpoints")[0], prefix)


def test_hsdp_each_rank_holds_half_the_optimizer_state_and_replicas_agree(reference):
    ranks = [json.loads((reference / "ranks" / f"rank{r}.json").read_text()) for r in range(4)]
    assert sorted(tuple(r["coordinate"]) for r in ranks) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in ranks:
        opt = r["optimizer"]
        assert opt["full_numel"] > 1000
        # AdamW moments are sharded 2-way inside a node: each rank holds ~half
        assert 0.4 <= opt["local_numel"] / opt["full_numel"] <= 0.55, opt
    by_coord = {tuple(r["coordinate"]): r["param_digest"] for r in ranks}
    assert by_coord[(0, 0)] == by_coord[(1, 0)]  # same shard on both "nodes": replicas equal
    assert by_coord[(0, 1)] == by_coord[(1, 1)]
    assert by_coord[(0, 0)] != by_coord[(0, 1)]  # the two shards differ: really sharded
    result = json.loads((reference / "result.json").read_text())
    assert result["complete"] and result["step"] == 16 and result["mesh"] == [2, 2]
    assert result["goodput"]["restarts"] == 0 and 0 < result["goodput"]["goodput"] <= 1


def test_sigkill_mid_training_then_resume_matches_uninterrupted_run_bitwise(reference, tmp_path):
    cfg = tiny_config(tmp_path / "run")
    proc = start(cfg, tmp_path)
    beat = tmp_path / "run" / "heartbeat.json"
    deadline = time.time() + 240
    step = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            step = json.loads(beat.read_text())["step"]
        except (OSError, ValueError):
            step = 0
        if step >= 6:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, (
        f"run was not killed mid-training (step {step}): {proc.stdout.read()[-3000:]}"
    )
    assert not (tmp_path / "run" / "result.json").exists() and step < 16
    killed_at = json.loads(beat.read_text())["step"]
    last_complete = int(Path(complete_checkpoints(tmp_path / "run" / "checkpoints")[0]).name.split("-")[1])
    assert last_complete <= killed_at and killed_at - last_complete <= 4

    out = run(cfg, tmp_path)
    assert "resumed from" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["step"] == 16 and result["goodput"]["restarts"] == 1
    assert result["goodput"]["lost_steps"] == killed_at - last_complete
    ref, got = final_state(reference), final_state(tmp_path / "run")
    assert ref.keys() == got.keys() and len(ref) > 10
    for k in ref:
        assert torch.equal(ref[k], got[k]), k
    ref_opt, got_opt = final_state(reference, "optim."), final_state(tmp_path / "run", "optim.")
    for k in ref_opt:
        assert torch.equal(ref_opt[k], got_opt[k]), k
    assert (
        result["lineage"]["sampler_position"]
        == json.loads((reference / "result.json").read_text())["lineage"]["sampler_position"]
    )


def test_resume_on_two_ranks_skips_corrupted_and_partial_checkpoints(reference, tmp_path):
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    for step in (4, 8):
        shutil.copytree(reference / "checkpoints" / f"step-{step:08d}", ckpts / f"step-{step:08d}")
    shard = sorted((ckpts / "step-00000008").glob("__*.distcp"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte: same size, wrong CRC
    shard.write_bytes(bytes(data))
    partial = ckpts / "step-00000012.tmp"  # a save that never completed
    shutil.copytree(reference / "checkpoints" / "step-00000012", partial)
    (partial / "COMPLETE").unlink()

    out = run(tiny_config(tmp_path / "run", topology__nodes=1, topology__gpus_per_node=2), tmp_path)
    assert "skipping corrupted checkpoint" in out and "CRC32 mismatch" in out
    assert "skipping partially written checkpoint" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["resumed_from"].endswith("step-00000004") and result["step"] == 16
    assert result["world_size"] == 2 and result["mesh"] == [1, 2]
    ref_result = json.loads((reference / "result.json").read_text())
    assert (
        result["lineage"]["sampler_position"]["global_position"]
        == ref_result["lineage"]["sampler_position"]["global_position"]
    )
    # same global batches and dropout masks on 2 ranks: equal up to reduction order (~1e-8)
    ref, got = final_state(reference), final_state(tmp_path / "run")
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=0, atol=1e-6, msg=k)


def test_lineage_command_prints_the_checkpoint_lineage(reference):
    res = CliRunner().invoke(app, ["lineage", str(reference / "checkpoints" / "step-00000016")])
    assert res.exit_code == 0, res.output
    assert "manifest_hash: synthetic-48x16-seed0" in res.output
    assert "code_version: " in res.output and "sampler_position: " in res.output and "step: 16" in res.output
    bad = CliRunner().invoke(app, ["lineage", str(reference / "nope")])
    assert bad.exit_code == 2


def test_sigterm_checkpoints_at_the_agreed_step_and_exits_3(tmp_path):
    cfg = tiny_config(tmp_path / "run", steps=400, topology__nodes=1, topology__gpus_per_node=2)
    proc = start(cfg, tmp_path)
    beat = tmp_path / "run" / "heartbeat.json"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads(beat.read_text())["step"] >= 5:
                proc.send_signal(signal.SIGTERM)  # the launcher only, as a preempting scheduler does
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert not result["complete"] and 5 <= result["step"] < 400
    newest = Path(complete_checkpoints(tmp_path / "run" / "checkpoints")[0])
    assert newest.name == f"step-{result['step']:08d}" and result["checkpoint"] == str(newest)
    assert json.loads(beat.read_text())["step"] == result["step"]
