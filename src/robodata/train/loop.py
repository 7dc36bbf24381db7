"""The training loop of one rank: resume, step, checkpoint every N steps and at exit."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from robodata.storage import StorageLocation
from robodata.train.checkpoint import CheckpointManager, checkpoint_keys
from robodata.train.config import TrainConfig
from robodata.train.data import DATA_BUILDERS, StatefulLoader
from robodata.train.goodput import GoodputTracker, Heartbeat
from robodata.train.lineage import code_version, config_hash
from robodata.train.mesh import Topology, init_topology, optimizer_footprint, shard_model
from robodata.train.model import NoiseKey, build_model, shard_units, to_inputs

log = logging.getLogger("robodata.train")


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Linear warmup, then cosine decay to 10% over the run."""
    o = cfg.optim
    if step < o.warmup_steps:
        return o.lr * (step + 1) / o.warmup_steps
    frac = (step - o.warmup_steps) / max(1, cfg.steps - o.warmup_steps)
    return o.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    st = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        st["cuda"] = torch.cuda.get_rng_state(device)
    return st


def _param_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        local = p.to_local() if hasattr(p, "to_local") else p
        h.update(name.encode())
        h.update(local.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Trainer:
    def __init__(self, cfg: TrainConfig, topo: Topology, started_at: float | None = None):
        self.cfg, self.topo = cfg, topo
        self.run_dir = Path(cfg.run_dir)
        self.goodput = GoodputTracker(started_at)
        self.heartbeat = Heartbeat(self.run_dir)
        torch.manual_seed(cfg.seed)  # identical init on every rank: FSDP2 shards each rank's own copy
        model = build_model(cfg.model, cfg.data.frames).to(topo.device)
        self.model = shard_model(model, shard_units(model), topo.mesh)
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=o.lr, betas=(o.betas[0], o.betas[1]), weight_decay=o.weight_decay
        )
        self.source = DATA_BUILDERS[cfg.data.kind](cfg, topo.rank, topo.world_size)
        self.loader = StatefulLoader(
            self.source, cfg.local_batch_size, topo.world_size, cfg.data.num_workers, cfg.data.prefetch_factor, cfg.seed
        )
        self.ckpt = CheckpointManager(
            cfg.checkpoint_dir,
            cfg.checkpoint.keep,
            cfg.checkpoint.verify,
            topo.rank,
            topo.world_size,
            topo.device,
            StorageLocation.from_env(cfg.checkpoint_dir).fsspec_options(),
        )
        self.step = 0
        self.last_saved = -1
        self.resumed_from: str | None = None
        self.stop_requested = False
        self.first_loss: tuple[int, float] | None = None  # (step, loss) of this attempt's first step
        self.config_dict = dataclasses.asdict(cfg)

    # ---------------------------------------------------------------- state
    def _state(self) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.optimizer)
        train = {
            "step": self.step,
            "loader": self.loader.state_dict(),
            "goodput": self.goodput.state_dict(),
            "world_size": self.topo.world_size,
            "global_batch_size": self.cfg.global_batch_size,
        }
        box = [json.dumps(train)]
        dist.broadcast_object_list(box, src=0)  # rank 0's ledger is the run's (one copy is saved)
        return {"model": msd, "optim": osd, "train": box[0], f"rng_rank{self.topo.rank}": _rng_state(self.topo.device)}

    def lineage(self) -> dict[str, Any]:
        lin: dict[str, Any] = dict.fromkeys(("manifest_hash", "catalog_version", "spec_hash", "layout_version"))
        lin.update(self.source.lineage)
        hashed = {k: v for k, v in self.config_dict.items() if k != "run_dir"}
        lin.update(
            code_version=code_version(), config_hash=config_hash(hashed), sampler_position=self.loader.state_dict()
        )
        return lin

    def save(self) -> str:
        t = time.perf_counter()
        state = self._state()
        meta = {
            "step": self.step,
            "lineage": self.lineage(),
            "goodput": self.goodput.report(),
            "topology": {
                "nodes": self.cfg.topology.nodes,
                "gpus_per_node": self.cfg.topology.gpus_per_node,
                "backend": self.topo.backend,
            },
            "config": self.config_dict,
        }
        path = self.ckpt.save(self.step, state, meta)
        self.last_saved = self.step
        self.goodput.checkpointed(time.perf_counter() - t)
        return path

    def resume(self) -> None:
        path = self.ckpt.latest()
        if path is None:
            return
        keys = checkpoint_keys(path, self.ckpt.options)
        state = self._state()
        rng_key = f"rng_rank{self.topo.rank}"
        for k in list(state[rng_key]):  # a rank (or a cuda generator) the saved world did not have
            if f"{rng_key}.{k}" not in keys:
                del state[rng_key][k]
        if not state[rng_key]:
            del state[rng_key]
        state["train"] = ""
        self.ckpt.load(path, state)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        train = json.loads(state["train"])
        rng = state.get(rng_key, {})
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
            if "cuda" in rng and self.topo.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"], self.topo.device)
        self.loader.load_state_dict(train["loader"])
        self.step = self.last_saved = int(train["step"])
        beat = self.heartbeat.last_step() if self.topo.is_main else None
        self.goodput.resumed(train["goodput"], self.step, beat)
        self.resumed_from = str(path)
        if self.topo.is_main:
            log.warning(
                "resumed from %s at step %d (saved on world size %d; %d steps lost)",
                path,
                self.step,
                train["world_size"],
                self.goodput.lost_steps_last,
            )

    # ---------------------------------------------------------------- loop
    def _stop_agreed(self) -> bool:
        flag = torch.tensor([1.0 if self.stop_requested else 0.0], device=self.topo.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def train(self) -> dict[str, Any]:
        cfg, topo = self.cfg, self.topo
        self.resume()
        prev = signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop_requested", True))
        it = iter(self.loader)
        self.goodput.started()
        loss_val = float("nan")
        parts: dict[str, float] = {}
        try:
            while self.step < cfg.steps:
                t0 = time.perf_counter()
                batch = next(it)
                t1 = time.perf_counter()
                for g in self.optimizer.param_groups:
                    g["lr"] = lr_at(cfg, self.step)
                inputs = to_inputs(batch, cfg.model, cfg.data.frames, topo.device)
                key = NoiseKey(cfg.seed, self.step, topo.rank, topo.world_size, cfg.global_batch_size)
                loss, parts = self.model.loss(inputs, key)
                loss.backward()
                if cfg.optim.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.grad_clip)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                if topo.device.type == "cuda":
                    torch.cuda.synchronize(topo.device)
                loss_val = float(loss.detach())
                self.step += 1
                if self.first_loss is None:
                    self.first_loss = (self.step, loss_val)
                self.goodput.step(t1 - t0, time.perf_counter() - t1)
                if topo.is_main:
                    self.heartbeat.beat(self.step, loss=loss_val)
                    if self.step % cfg.log_every == 0:
                        log.info("step %d loss %.5f %s", self.step, loss_val, parts)
                if self.step % cfg.checkpoint.every_steps == 0 and self.step < cfg.steps:
                    self.save()
                if self._stop_agreed():
                    log.warning("rank %d: SIGTERM: checkpointing at step %d and stopping", topo.rank, self.step)
                    break
            if self.last_saved != self.step:
                self.save()
        finally:
            signal.signal(signal.SIGTERM, prev)
        return self._finish(loss_val, parts)

    def _finish(self, loss_val: float, parts: dict[str, float]) -> dict[str, Any]:
        fp = optimizer_footprint(self.optimizer)
        rank_info = {
            "rank": self.topo.rank,
            "coordinate": list(self.topo.coordinate),
            "optimizer": fp,
            "param_digest": _param_digest(self.model),
        }
        ranks_dir = self.run_dir / "ranks"
        ranks_dir.mkdir(parents=True, exist_ok=True)
        (ranks_dir / f"rank{self.topo.rank}.json").write_text(json.dumps(rank_info))
        infos: list[Any] = [None] * self.topo.world_size
        dist.all_gather_object(infos, rank_info)
        result = {
            "step": self.step,
            "steps": self.cfg.steps,
            "complete": self.step >= self.cfg.steps,
            "checkpoint": self.ckpt.path(self.last_saved),
            "resumed_from": self.resumed_from,
            "loss": loss_val,
            **parts,
            "first_loss": self.first_loss,
            "lineage": self.lineage(),
            "goodput": self.goodput.report(),
            "checkpoint_interval": self.cfg.checkpoint.every_steps,
            "world_size": self.topo.world_size,
            "mesh": [self.cfg.topology.nodes, self.cfg.topology.gpus_per_node],
            "optimizer_local_bytes_max": max(i["optimizer"]["local_bytes"] for i in infos),
            "optimizer_full_bytes": fp["full_bytes"],
            "ranks": infos,
        }
        if self.topo.is_main:
            tmp = self.run_dir / "result.json.tmp"
            tmp.write_text(json.dumps(result, indent=1, default=str))
            os.replace(tmp, self.run_dir / "result.json")
        return result


def run_worker(cfg: TrainConfig, started_at: float | None = None) -> dict[str, Any]:
    """Entry point of one rank (env: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."""
    from robodata.train.mesh import shutdown

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not torch.cuda.is_available():
        local_procs = int(os.environ.get("LOCAL_WORLD_SIZE", cfg.topology.gpus_per_node))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_procs)))
    topo = init_topology(cfg.topology)
    try:
        return Trainer(cfg, topo, started_at).train()
    finally:
        shutdown()
