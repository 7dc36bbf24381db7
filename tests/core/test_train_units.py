"""Fast single-process checks of the training pieces: config validation, the resumable
loader (prefetch, world-size change), keyed dropout, checkpoint integrity, batch mapping."""

from __future__ import annotations

import json
import time

import pytest
import torch

from robodata.errors import ConfigError, RobodataError
from robodata.train.checkpoint import checkpoint_problem, complete_checkpoints, crc32_file, partial_checkpoints
from robodata.train.commands import apply_overrides
from robodata.train.config import ModelConfig, config_from_dict
from robodata.train.data import DataSource, RoundRobinSampler, StatefulLoader, SyntheticEpisodes
from robodata.train.goodput import GoodputTracker
from robodata.train.model import NoiseKey, keyed_dropout_mask, to_inputs


def test_config_is_validated_up_front():
    with pytest.raises(ConfigError, match="multiple of the world size 4"):
        config_from_dict({"run_dir": "x", "global_batch_size": 6, "topology": {"nodes": 2, "gpus_per_node": 2}})
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict({"run_dir": "x", "topology": {"node": 2}})
    with pytest.raises(ConfigError, match="nccl needs device cuda"):
        config_from_dict({"run_dir": "x", "topology": {"device": "cpu", "backend": "nccl"}})
    with pytest.raises(ConfigError, match="data.manifest"):
        config_from_dict({"run_dir": "x", "data": {"kind": "manifest"}})
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["steps"])
    cfg = config_from_dict(apply_overrides({"run_dir": "x"}, ["topology.nodes=2", "model.channels=[4, 8]"]))
    assert cfg.topology.world_size == 2 and cfg.model.channels == [4, 8] and cfg.local_batch_size == 16


def _loader(ds, rank, world, batch, workers=0):
    return StatefulLoader(
        DataSource(ds, RoundRobinSampler(len(ds), seed=3, rank=rank, world_size=world)),
        batch,
        world,
        num_workers=workers,
    )


def _ids(batch):  # synthetic samples are identified by their state vector
    return {tuple(round(float(v), 6) for v in row) for row in batch["joint_pos"]}


def test_loader_resumes_the_same_global_batches_on_another_world_size():
    ds = SyntheticEpisodes(40, ["cam"], 2, 8, 3, 2, 2, seed=1)
    l4 = [_loader(ds, r, 4, 2) for r in range(4)]
    its = [iter(loader) for loader in l4]
    for _ in range(7):  # crosses the epoch boundary (40 samples / 8 per step = 5 steps)
        for it in its:
            next(it)
    state = l4[0].state_dict()
    assert state["epoch"] == 1 and state["global_position"] == 16
    expected = set().union(*(_ids(next(it)) for it in its))  # the 8th global batch on 4 ranks
    l2 = [_loader(ds, r, 2, 4) for r in range(2)]
    for loader in l2:
        loader.load_state_dict(json.loads(json.dumps(state)))
    got = set().union(*(_ids(next(iter(loader))) for loader in l2))
    assert got == expected and len(got) == 8
    with pytest.raises(RobodataError, match="not a multiple"):
        _loader(ds, 0, 3, 1).load_state_dict(dict(state, global_position=16))


def test_loader_resumed_after_an_epochs_last_batch_starts_the_next_epoch():
    ds = SyntheticEpisodes(40, ["cam"], 2, 8, 3, 2, 2, seed=1)
    first = _loader(ds, 0, 1, 8)
    it = iter(first)
    for _ in range(5):  # the whole of epoch 0 (40 samples / 8), as a checkpoint on its last step sees it
        next(it)
    state = first.state_dict()
    assert (state["epoch"], state["position"]) == (0, 40)
    resumed = _loader(ds, 0, 1, 8)
    resumed.load_state_dict(state)
    assert _ids(next(iter(resumed))) == _ids(next(it))  # epoch 1's first batch, not "no full batch"
    tiny = _loader(SyntheticEpisodes(4, ["cam"], 2, 8, 3, 2, 2, seed=1), 0, 1, 8)
    with pytest.raises(RobodataError, match="no full batch"):  # a fresh epoch that is too small still fails
        next(iter(tiny))


def test_loader_state_counts_taken_batches_not_prefetched_ones():
    ds = SyntheticEpisodes(32, ["cam"], 2, 8, 3, 2, 2)
    loader = _loader(ds, 0, 1, 4, workers=1)
    it = iter(loader)
    seen = [_ids(next(it)) for _ in range(2)]
    time.sleep(0.2)  # the worker has prefetched ahead by now
    state = loader.state_dict()
    assert state["position"] == 8 and state["epoch"] == 0
    fresh = _loader(ds, 0, 1, 4)
    fresh.load_state_dict(state)
    assert _ids(next(iter(fresh))) == _ids(next(it))
    assert seen[0] != seen[1]


def test_keyed_dropout_masks_do_not_depend_on_world_size():
    p, gb = 0.3, 8

    def mask_of_sample(g, world):  # global sample g sits at row g // world of rank g % world
        rank, row = g % world, g // world
        m = keyed_dropout_mask(torch.Size([gb // world, 16]), p, NoiseKey(5, 11, rank, world, gb), torch.device("cpu"))
        return m[row]

    for g in range(gb):
        assert torch.equal(mask_of_sample(g, 1), mask_of_sample(g, 2)) and torch.equal(
            mask_of_sample(g, 1), mask_of_sample(g, 4)
        )
    m = keyed_dropout_mask(torch.Size([gb, 16]), p, NoiseKey(5, 12, 0, 1, gb), torch.device("cpu"))
    assert 0.5 < (m > 0).float().mean() < 0.9 and not torch.equal(m, mask_of_sample(0, 1).expand_as(m))


def _fake_checkpoint(root, step):
    d = root / f"step-{step:08d}"
    d.mkdir(parents=True)
    for name, data in ((".metadata", b"m" * 10), ("__0_0.distcp", b"x" * 100), ("meta.json", b"{}")):
        (d / name).write_bytes(data)
    files = {p.name: [p.stat().st_size, crc32_file(p)] for p in d.iterdir()}
    (d / "COMPLETE").write_text(json.dumps({"step": step, "files": files}))
    return d


def test_checkpoint_integrity_checks(tmp_path):
    good, newer = _fake_checkpoint(tmp_path, 4), _fake_checkpoint(tmp_path, 8)
    (tmp_path / "step-00000012.tmp").mkdir()
    (tmp_path / "step-00000016").mkdir()  # no marker: incomplete
    assert complete_checkpoints(tmp_path) == [str(newer), str(good)]
    assert partial_checkpoints(tmp_path) == [str(tmp_path / "step-00000012.tmp"), str(tmp_path / "step-00000016")]
    assert checkpoint_problem(good) is None
    shard = newer / "__0_0.distcp"
    shard.write_bytes(b"x" * 50 + b"y" + b"x" * 49)
    assert "CRC32 mismatch" in checkpoint_problem(newer)
    assert checkpoint_problem(newer, verify_crc=False) is None  # same size: only the CRC catches it
    shard.write_bytes(b"x" * 10)
    assert "expected 100" in checkpoint_problem(newer, verify_crc=False)
    (good / "COMPLETE").write_text("{not json")
    assert "unreadable" in checkpoint_problem(good)


def test_batch_mapping_names_what_is_missing_or_misshaped():
    cfg = ModelConfig(cameras=["a", "b"], state_dim=3, action_dim=2, action_chunk=2)
    frames = torch.zeros(2, 2, 8, 8, 3, dtype=torch.uint8)
    ok = {"a": frames, "b": frames, "joint_pos": torch.zeros(2, 1, 3), "cmd": torch.zeros(2, 4, 2)}
    inputs = to_inputs(ok, cfg, 2, torch.device("cpu"))
    assert (
        inputs.frames.shape == (2, 2, 2, 3, 8, 8) and inputs.state.shape == (2, 3) and inputs.action.shape == (2, 2, 2)
    )
    with pytest.raises(RobodataError, match=r"lacks \['b'\]"):
        to_inputs({k: v for k, v in ok.items() if k != "b"}, cfg, 2, torch.device("cpu"))
    with pytest.raises(RobodataError, match="do not match the model"):
        to_inputs(dict(ok, cmd=torch.zeros(2, 1, 2)), cfg, 2, torch.device("cpu"))


def test_goodput_charges_restarts_and_lost_steps():
    g = GoodputTracker(started_at=time.time() - 1.0)
    g.started()
    for _ in range(4):
        g.step(0.01, 0.09)
    saved = g.state_dict()
    saved["saved_at"] -= 5.0  # checkpoint written 5 s ago
    r = GoodputTracker()
    r.resumed(saved, checkpoint_step=4, heartbeat_step=7)
    rep = r.report()
    assert rep["restarts"] == 1 and rep["lost_steps"] == 3 and rep["restart_lost_s"] >= 5.0
    assert rep["wall_s"] >= 6.0 and rep["data_wait_fraction"] == pytest.approx(0.1, abs=1e-3)
    assert rep["goodput"] == pytest.approx(0.36 / rep["wall_s"], rel=1e-2)


def test_config_numbers_are_type_checked_and_yaml_exponents_accepted():
    cfg = config_from_dict(apply_overrides({"run_dir": "x"}, ["optim.lr=3e-3", "checkpoint.every_steps=5"]))
    assert cfg.optim.lr == pytest.approx(0.003)
    with pytest.raises(ConfigError, match="OptimConfig.lr must be a number"):
        config_from_dict({"run_dir": "x", "optim": {"lr": "fast"}})
    with pytest.raises(ConfigError, match="TrainConfig.steps must be an integer"):
        config_from_dict({"run_dir": "x", "steps": 2.5})
