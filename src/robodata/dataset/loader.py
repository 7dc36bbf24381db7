"""PatternLoader: a torch DataLoader over PatternDataset.batch, resumable at the batch the
trainer actually consumed.

Batches are built whole inside the workers (one GOP decode per batch and episode, tensors
written once into shared memory), so the DataLoader runs with batch_size=None over a
BatchSampler. `state_dict()` records how many samples this loader has *handed out*, not
how many the sampler has produced (workers prefetch ahead), so a resumed run continues
with exactly the next batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset

from robodata.config import require
from robodata.dataset.dataset import PatternDataset
from robodata.dataset.sampler import PatternSampler


@dataclass(frozen=True)
class LoaderConfig:
    batch_size: int = 32
    num_workers: int = 2
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int = 2
    drop_last: bool = False
    timeout_s: float = 0.0

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "batch_size must be >= 1")
        require(self.num_workers >= 0, "num_workers must be >= 0")
        require(self.prefetch_factor >= 1, "prefetch_factor must be >= 1")
        require(not self.persistent_workers or self.num_workers > 0, "persistent_workers needs num_workers > 0")


class _Batches(Dataset):
    def __init__(self, dataset: PatternDataset):
        self.dataset = dataset

    def __getitem__(self, keys: list) -> dict[str, torch.Tensor]:
        return self.dataset.batch(keys)

    def __len__(self) -> int:
        return len(self.dataset)


class PatternLoader:
    def __init__(self, dataset: PatternDataset, sampler: PatternSampler, config: LoaderConfig | None = None):
        self.dataset = dataset
        self.sampler = sampler
        self.config = cfg = config or LoaderConfig()
        self._consumed = sampler.position
        extra: dict[str, Any] = {}
        if cfg.num_workers > 0:
            extra = {"prefetch_factor": cfg.prefetch_factor, "persistent_workers": cfg.persistent_workers}
        self._dl = DataLoader(_Batches(dataset), batch_size=None,
                              sampler=BatchSampler(sampler, cfg.batch_size, cfg.drop_last),
                              num_workers=cfg.num_workers, pin_memory=cfg.pin_memory, timeout=cfg.timeout_s, **extra)

    def __len__(self) -> int:
        return len(self._dl)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        self._consumed = self.sampler.position
        for batch in self._dl:
            self._consumed += len(batch["t"])
            yield batch

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)
        self._consumed = self.sampler.position

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_at(self._consumed)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state["sampler"])
        self._consumed = self.sampler.position
