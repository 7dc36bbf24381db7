"""Topology: process group + 2-D DeviceMesh (replicate across nodes, shard within a node).

FSDP2 `fully_shard` over a 2-D mesh is HSDP: parameters, gradients and optimizer state are
sharded over the "shard" dim (the GPUs of one node, fast links) and replicated over the
"replicate" dim (across nodes, where only the gradient all-reduce travels).

Ranks are laid out node-major (torchrun's convention): rank = node * gpus_per_node + local_rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard

from robodata.errors import ConfigError
from robodata.train.config import TopologyConfig

M = TypeVar("M", bound=nn.Module)

MESH_DIMS = ("replicate", "shard")


@dataclass
class Topology:
    rank: int
    world_size: int
    local_rank: int
    node: int
    device: torch.device
    backend: str
    mesh: DeviceMesh

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def coordinate(self) -> tuple[int, int]:
        """(replicate index, shard index) of this rank in the mesh."""
        coord = self.mesh.get_coordinate()
        assert coord is not None
        return int(coord[0]), int(coord[1])


def resolve_device(cfg: TopologyConfig) -> tuple[str, str]:
    device = cfg.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("topology.device is cuda but no CUDA device is available")
    backend = cfg.backend if cfg.backend != "auto" else ("nccl" if device == "cuda" else "gloo")
    return device, backend


def init_topology(cfg: TopologyConfig) -> Topology:
    """Join the process group from torchrun-style env (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT) and build the (nodes, gpus_per_node) mesh."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except KeyError as exc:
        raise ConfigError(f"distributed env lacks {exc}: launch with `robodata train` or torchrun") from None
    if world != cfg.world_size:
        raise ConfigError(
            f"WORLD_SIZE={world} but topology is {cfg.nodes} nodes x {cfg.gpus_per_node} "
            f"gpus_per_node = {cfg.world_size}"
        )
    local_rank = int(os.environ.get("LOCAL_RANK", rank % cfg.gpus_per_node))
    device_type, backend = resolve_device(cfg)
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=cfg.timeout_s))
    mesh = init_device_mesh(device_type, (cfg.nodes, cfg.gpus_per_node), mesh_dim_names=MESH_DIMS)
    return Topology(rank, world, local_rank, rank // cfg.gpus_per_node, device, backend, mesh)


def shard_model(model: M, units: list[nn.Module], mesh: DeviceMesh) -> M:
    """Apply fully_shard bottom-up: one FSDP group per unit, then the root (the rest)."""
    for unit in units:
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def local_numel(t: torch.Tensor) -> int:
    """Elements this rank actually stores (the local shard of a DTensor)."""
    to_local = getattr(t, "to_local", None)
    return int(to_local().numel()) if to_local is not None else int(t.numel())


def optimizer_footprint(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes/elements of optimizer state this rank holds vs the unsharded total."""
    local = full = local_bytes = full_bytes = 0
    for state in optimizer.state.values():
        for v in state.values():
            if not torch.is_tensor(v):
                continue
            n = local_numel(v)
            local, full = local + n, full + int(v.numel())
            local_bytes += n * v.element_size()
            full_bytes += int(v.numel()) * v.element_size()
    return {"local_numel": local, "full_numel": full, "local_bytes": local_bytes, "full_bytes": full_bytes}


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
