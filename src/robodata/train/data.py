"""Training data: a pluggable (dataset, sampler) source and a resumable per-rank loader.

A source is a builder `fn(cfg, rank, world_size) -> DataSource` registered under
`data.kind`. The dataset is a map-style torch Dataset whose items are dicts of tensors in
robodata.dataset's layout ({camera: uint8 (T, H, W, 3), "joint_pos": float32, "cmd": float32});
the
sampler is a Stateful distributed sampler (set_epoch, state_at(consumed), load_state_dict)
that deals the global order round robin (rank r takes items r, r + W, ...).

`synthetic` is a deterministic in-memory world (a blob moved by the action) for tests and
benches; `manifest` is the real dataset over a curated manifest (robodata.dataset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from robodata.config import require
from robodata.errors import RobodataError
from robodata.train.config import TrainConfig
from robodata.train.source import DataSource

__all__ = ["DATA_BUILDERS", "DataSource", "RoundRobinSampler", "StatefulLoader", "SyntheticEpisodes"]


# ------------------------------------------------------------------ synthetic world
class SyntheticEpisodes(Dataset):
    """Sample i: an "arm" blob at a position set by the state and a "goal" blob seen only in
    the frames; the action chunk reaches for the goal (a fixed smooth function of state and
    goal, so predicting it needs vision), and the arm moves with the first action over the
    frames. Deterministic in (seed, i)."""

    def __init__(
        self,
        n: int,
        cameras: list[str],
        frames: int,
        size: int,
        state_dim: int,
        action_dim: int,
        chunk: int,
        seed: int = 0,
        state_key: str = "joint_pos",
        action_key: str = "cmd",
    ):
        self.state_key, self.action_key = state_key, action_key
        self.n, self.cameras, self.frames, self.size = n, list(cameras), frames, size
        self.state_dim, self.action_dim, self.chunk, self.seed = state_dim, action_dim, chunk, seed
        rng = np.random.default_rng([seed, 7])
        self.w = (rng.normal(size=(action_dim, state_dim)) / np.sqrt(state_dim)).astype(np.float32)
        self.v = rng.normal(size=(action_dim, 2)).astype(np.float32)
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
        self.grid = (yy, xx)

    def __len__(self) -> int:
        return self.n

    def _blob(self, cy: float, cx: float) -> np.ndarray:
        yy, xx = self.grid
        return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * (0.08 * self.size) ** 2))[..., None]

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not 0 <= i < self.n:
            raise IndexError(f"synthetic sample {i} out of range [0, {self.n})")
        rng = np.random.default_rng([self.seed, i])
        state = rng.uniform(-1, 1, self.state_dim).astype(np.float32)
        goal = rng.uniform(-1, 1, 2).astype(np.float32)
        ramp = (np.arange(1, self.chunk + 1, dtype=np.float32) / self.chunk)[:, None]
        action = (np.tanh(0.5 * self.w @ state + self.v @ goal)[None, :] * ramp).astype(np.float32)
        sample: dict[str, Any] = {self.state_key: torch.from_numpy(state), self.action_key: torch.from_numpy(action)}
        arm0 = 0.5 + 0.3 * np.array([state[0], state[1 % self.state_dim]])
        vel = 0.1 * np.array([action[0, 0], action[0, 1 % self.action_dim]])
        for c, cam in enumerate(self.cameras):
            shift = 0.04 * c  # each camera sees the scene a bit offset
            goal_blob = self._blob(*((0.5 + 0.35 * goal + shift) * self.size)) * np.array([40, 60, 220])
            noise = rng.integers(0, 24, (self.frames, self.size, self.size, 1)).astype(np.float32)
            out = np.empty((self.frames, self.size, self.size, 3), np.uint8)
            for t in range(self.frames):
                arm = self._blob(*((arm0 + t * vel + shift) * self.size)) * np.array([220, 120, 40])
                out[t] = np.clip(noise[t] + arm + goal_blob, 0, 255).astype(np.uint8)
            sample[cam] = torch.from_numpy(out)
        return sample


class RoundRobinSampler(Sampler[int]):
    """Seeded global permutation per epoch; rank r yields items r, r + W, ... (floor(N / W) each)."""

    def __init__(self, num_samples: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        require(world_size >= 1 and 0 <= rank < world_size, f"bad rank {rank} for world_size {world_size}")
        self.num_samples, self.seed, self.rank, self.world_size = num_samples, seed, rank, world_size
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        return self.num_samples // self.world_size

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(self.num_samples, generator=g)
        for pos in range(self.position, len(self)):
            self.position = pos + 1
            yield int(perm[pos * self.world_size + self.rank])
        self.position = 0

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.position)

    def state_at(self, consumed: int) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "position": int(consumed),
            "rank": self.rank,
            "world_size": self.world_size,
            "num_samples": self.num_samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in ("seed", "world_size", "num_samples"):
            require(
                state[k] == getattr(self, k),
                f"sampler state was saved with {k}={state[k]!r}, this sampler has {getattr(self, k)!r}",
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def build_synthetic(cfg: TrainConfig, rank: int, world_size: int) -> DataSource:
    m, d = cfg.model, cfg.data
    ds = SyntheticEpisodes(
        d.episodes,
        m.cameras,
        d.frames,
        d.image_size,
        m.state_dim,
        m.action_dim,
        m.action_chunk,
        seed=cfg.seed,
        state_key=m.state_key,
        action_key=m.action_key,
    )
    lineage = {"source": "synthetic", "manifest_hash": f"synthetic-{d.episodes}x{d.image_size}-seed{cfg.seed}"}
    return DataSource(ds, RoundRobinSampler(d.episodes, cfg.seed, rank, world_size), lineage)


def build_manifest(cfg: TrainConfig, rank: int, world_size: int) -> DataSource:
    from robodata.train.manifest_source import build_manifest_source

    return build_manifest_source(cfg, rank, world_size)


DATA_BUILDERS: dict[str, Callable[[TrainConfig, int, int], DataSource]] = {
    "synthetic": build_synthetic,
    "manifest": build_manifest,
}


# ------------------------------------------------------------------ resumable loader
class StatefulLoader:
    """Endless per-rank batches from (dataset, sampler); its state counts only the samples the
    loop has *taken* (prefetched ones are re-read after a resume), and is portable across world
    sizes: the global position (per-rank position x world size) is what is kept."""

    def __init__(
        self,
        source: DataSource,
        batch_size: int,
        world_size: int,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        seed: int = 0,
    ):
        self.sampler, self.batch_size, self.world_size = source.sampler, batch_size, world_size
        kw: dict[str, Any] = {"num_workers": num_workers, "persistent_workers": num_workers > 0}
        if num_workers > 0:
            kw["prefetch_factor"] = prefetch_factor
        self.loader = DataLoader(
            source.dataset,
            batch_size=batch_size,
            sampler=self.sampler,
            drop_last=True,
            generator=torch.Generator().manual_seed(seed),
            **kw,
        )
        self.epoch = self.sampler.epoch
        self.consumed = 0  # samples of this rank taken in the current epoch

    def __iter__(self) -> Iterator[Any]:
        while True:
            self.sampler.set_epoch(self.epoch)
            self.sampler.load_state_dict(self.sampler.state_at(self.consumed) | {"epoch": self.epoch})
            # resumed with the epoch's last batch already taken (a checkpoint on an epoch's last
            # step): nothing is left in it, so the next epoch follows
            resumed_mid_epoch = self.consumed > 0
            got = False
            for batch in self.loader:
                got = True
                self.consumed += self.batch_size
                yield batch
            if not got and not resumed_mid_epoch:
                raise RobodataError(
                    f"epoch {self.epoch} gave no full batch of {self.batch_size} on this rank "
                    f"(sampler length {len(self.sampler)}): the dataset is too small"
                )
            self.epoch, self.consumed = self.epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        st = dict(self.sampler.state_at(self.consumed))
        st.pop("rank", None)  # the position is global; any rank's copy resumes every rank
        st.update(
            epoch=self.epoch,
            position=self.consumed,
            world_size=self.world_size,
            global_position=self.consumed * self.world_size,
        )
        return st

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume; a state saved on another world size resumes at the same global position."""
        global_pos = int(state.get("global_position", int(state["position"]) * int(state["world_size"])))
        if global_pos % self.world_size:
            raise RobodataError(
                f"cannot resume sampler at global position {global_pos} on world size "
                f"{self.world_size}: not a multiple (keep global_batch_size constant)"
            )
        self.epoch, self.consumed = int(state["epoch"]), global_pos // self.world_size
        mine = dict(state, position=self.consumed, world_size=self.world_size, epoch=self.epoch)
        mine.pop("global_position", None)
        self.sampler.set_epoch(self.epoch)
        self.sampler.load_state_dict(mine)
