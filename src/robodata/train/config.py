"""Typed training config (YAML), validated before any process starts.

run_dir: .train/run-a          # checkpoints, heartbeat, result.json; a rerun resumes here
steps: 200
global_batch_size: 32          # constant across world sizes: resuming on fewer ranks
topology: {nodes: 2, gpus_per_node: 2}   # sees the same global batches
data: {kind: synthetic}
checkpoint: {every_steps: 50}
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robodata.config import from_dict, load_yaml, require
from robodata.errors import ConfigError

BACKENDS = ("auto", "gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")
START_METHODS = ("auto", "fork", "spawn")
DATA_KINDS = ("synthetic", "manifest")


def check_numbers(obj: object) -> None:
    """Type-check int/float fields; YAML's "3e-3" (a string in YAML 1.1) becomes 0.003."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        v, where = getattr(obj, f.name), f"{type(obj).__name__}.{f.name}"
        if f.type == "float":
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise ConfigError(f"{where} must be a number, got {v!r}")
            try:
                setattr(obj, f.name, float(v))
            except ValueError:
                raise ConfigError(f"{where} must be a number, got {v!r}") from None
        elif f.type == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            raise ConfigError(f"{where} must be an integer, got {v!r}")


@dataclass
class TopologyConfig:
    nodes: int = 1  # replicate dim of the mesh (inter-node)
    gpus_per_node: int = 1  # shard dim of the mesh (intra-node); processes per node
    device: str = "auto"  # auto: cuda when available, else cpu
    backend: str = "auto"  # auto: nccl on cuda, gloo on cpu
    start_method: str = "auto"  # local launcher: fork on cpu, spawn on cuda
    timeout_s: float = 300.0  # collective timeout (a dead peer fails the run, not hangs it)

    def __post_init__(self) -> None:
        check_numbers(self)
        require(self.nodes >= 1, f"topology.nodes must be >= 1, got {self.nodes}")
        require(self.gpus_per_node >= 1, f"topology.gpus_per_node must be >= 1, got {self.gpus_per_node}")
        require(self.device in DEVICES, f"topology.device must be one of {DEVICES}, got {self.device!r}")
        require(self.backend in BACKENDS, f"topology.backend must be one of {BACKENDS}, got {self.backend!r}")
        require(
            self.start_method in START_METHODS,
            f"topology.start_method must be one of {START_METHODS}, got {self.start_method!r}",
        )
        require(self.timeout_s > 0, "topology.timeout_s must be > 0")
        require(not (self.device == "cpu" and self.backend == "nccl"), "topology: nccl needs device cuda")

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass
class ModelConfig:
    cameras: list[str] = field(default_factory=lambda: ["cam_left", "wrist"])
    state_key: str = "joint_pos"  # batch key of the proprio state, (B, S) or (B, T, S): last step used
    action_key: str = "cmd"  # batch key of the actions, (B, K', A) with K' >= action_chunk
    channels: list[int] = field(default_factory=lambda: [16, 32, 32])  # conv encoder, stride 2 each
    latent_dim: int = 64
    hidden_dim: int = 128
    state_dim: int = 7
    action_dim: int = 7
    action_chunk: int = 4  # actions predicted per sample
    dropout: float = 0.1  # masks keyed by (seed, step, global sample): world-size independent
    latent_loss_weight: float = 0.5

    def __post_init__(self) -> None:
        check_numbers(self)
        require(
            len(self.cameras) >= 1 and len(set(self.cameras)) == len(self.cameras),
            f"model.cameras must be distinct and non-empty, got {self.cameras}",
        )
        require(len(self.channels) >= 1 and all(c >= 1 for c in self.channels), "model.channels must be >= 1")
        for name in ("latent_dim", "hidden_dim", "state_dim", "action_dim", "action_chunk"):
            require(getattr(self, name) >= 1, f"model.{name} must be >= 1, got {getattr(self, name)}")
        require(0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout}")
        require(self.latent_loss_weight >= 0, "model.latent_loss_weight must be >= 0")


@dataclass
class DataConfig:
    kind: str = "synthetic"  # synthetic | manifest
    manifest: str | None = None  # manifest parquet (kind=manifest)
    episodes: int = 256  # synthetic: number of samples
    image_size: int = 32  # synthetic: frame height = width
    frames: int = 2  # frames per camera per sample: context + the next frame
    num_workers: int = 0  # DataLoader worker processes per rank
    prefetch_factor: int = 2
    # kind=manifest (robodata.dataset.PatternDataset / PatternSampler):
    split: str | None = "train"
    shuffle: str = "global"  # global keeps resumes on another world size exact; block is cache-friendlier
    block_size: int = 8
    stride_s: float = 0.5  # anchor spacing of the default read pattern
    pattern: dict | None = None  # a full ReadPattern (robodata.dataset) instead of the default
    # a MixPattern (robodata.dataset.mixpattern): a manifest mixing corpora read by role through a
    # MixedDataset; its batch keys are the roles (model.cameras [front, ...], state_key state, action_key action)
    mix_pattern: dict | None = None
    cache_dir: str | None = None  # node page cache for remote containers
    cache_budget_gb: float = 8.0
    storage_options: dict = field(default_factory=dict)  # fsspec options for s3:// manifests and caches

    def __post_init__(self) -> None:
        check_numbers(self)
        require(self.kind in DATA_KINDS, f"data.kind must be one of {DATA_KINDS}, got {self.kind!r}")
        require(self.kind != "manifest" or bool(self.manifest), "data.kind=manifest needs data.manifest")
        require(self.episodes >= 1, "data.episodes must be >= 1")
        require(self.image_size >= 8 and self.image_size % 2 == 0, "data.image_size must be even and >= 8")
        require(self.frames >= 2, "data.frames must be >= 2 (context frames + the next frame)")
        require(self.num_workers >= 0 and self.prefetch_factor >= 1, "data.num_workers >= 0, prefetch_factor >= 1")
        require(
            self.shuffle in ("global", "block", "none"), f"data.shuffle must be global|block|none, got {self.shuffle!r}"
        )
        require(
            self.block_size >= 1 and self.stride_s > 0 and self.cache_budget_gb > 0,
            "data.block_size >= 1, stride_s > 0, cache_budget_gb > 0",
        )
        require(self.pattern is None or self.mix_pattern is None, "data.pattern and data.mix_pattern: give one")
        if self.pattern is not None:
            from robodata.dataset import ReadPattern

            ReadPattern.from_dict(self.pattern)  # raises ConfigError on a bad pattern
        if self.mix_pattern is not None:
            from robodata.dataset import MixPattern

            MixPattern.from_dict(self.mix_pattern)


@dataclass
class OptimConfig:
    lr: float = 3e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 10
    grad_clip: float = 1.0  # 0 disables clipping

    def __post_init__(self) -> None:
        check_numbers(self)
        require(self.lr > 0, f"optim.lr must be > 0, got {self.lr}")
        require(self.weight_decay >= 0, "optim.weight_decay must be >= 0")
        require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "optim.betas must be two in [0, 1)")
        require(self.warmup_steps >= 0 and self.grad_clip >= 0, "optim.warmup_steps and grad_clip must be >= 0")


def _absolute(path: str) -> str:
    """A local folder made absolute (from the working directory now); URIs unchanged."""
    return path if "://" in path else os.path.abspath(path)


@dataclass
class CheckpointConfig:
    every_steps: int = 50  # also one at exit (end of training or SIGTERM)
    keep: int = 3  # complete checkpoints kept; older ones are deleted
    verify: bool = True  # check per-file CRC32 before resuming from a checkpoint
    root: str | None = None  # folder or s3://bucket/prefix for this run's checkpoints; None: run_dir/checkpoints
    # (S3 endpoint/credentials from the AWS_* variables, never from this file)

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.root is not None:
            require(
                bool(self.root) and (("://" not in self.root) or self.root.startswith(("s3://", "file://"))),
                f"checkpoint.root must be a folder or s3://..., got {self.root!r}",
            )
            self.root = _absolute(self.root)
        require(self.every_steps >= 1, f"checkpoint.every_steps must be >= 1, got {self.every_steps}")
        require(self.keep >= 1, f"checkpoint.keep must be >= 1, got {self.keep}")


@dataclass
class TrainConfig:
    run_dir: str
    steps: int = 100
    global_batch_size: int = 32
    seed: int = 0
    log_every: int = 10
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def __post_init__(self) -> None:
        check_numbers(self)
        require(bool(self.run_dir), "run_dir is required")
        self.run_dir = _absolute(self.run_dir)  # recorded in lineage and results: never relative to a cwd
        require(self.steps >= 1, f"steps must be >= 1, got {self.steps}")
        require(self.log_every >= 1, "log_every must be >= 1")
        ws = self.topology.world_size
        require(
            self.global_batch_size >= ws and self.global_batch_size % ws == 0,
            f"global_batch_size {self.global_batch_size} must be a positive multiple of the world size {ws} "
            f"(nodes {self.topology.nodes} x gpus_per_node {self.topology.gpus_per_node})",
        )
        if self.data.kind == "synthetic":
            require(
                self.data.episodes >= self.global_batch_size,
                f"data.episodes ({self.data.episodes}) must be >= global_batch_size ({self.global_batch_size})",
            )

    @property
    def local_batch_size(self) -> int:
        return self.global_batch_size // self.topology.world_size

    @property
    def checkpoint_dir(self) -> str:
        """Where checkpoints go: checkpoint.root (a folder or s3://...), else run_dir/checkpoints."""
        return self.checkpoint.root or str(Path(self.run_dir) / "checkpoints")


def load_config(path: str | Path) -> TrainConfig:
    return load_yaml(TrainConfig, path)


def config_from_dict(data: dict) -> TrainConfig:
    return from_dict(TrainConfig, data)


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """Apply dotted `key=value` overrides (values parsed as YAML) to a config mapping, in place."""
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        node = data
        *parents, leaf = key.split(".")
        for k in parents:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {k} is not a mapping")
        node[leaf] = yaml.safe_load(value)
    return data


def read_config_dict(path: str | Path) -> dict[str, Any]:
    """A training config YAML as a mapping (not yet validated)."""
    p = Path(path)
    try:
        data: Any = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at top level")
    return data


def load_with_overrides(path: str | Path, overrides: list[str] | None) -> TrainConfig:
    """Load and validate a TrainConfig from YAML plus overrides."""
    return config_from_dict(apply_overrides(read_config_dict(path), overrides))
