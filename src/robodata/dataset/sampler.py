"""PatternSampler: distributed-aware, seeded, resumable sample order over a SampleIndex.

The order is a keyed pseudo-random permutation computed on the fly (a Feistel network
with cycle walking), so it costs O(1) memory however many samples there are, and a
resumed run recomputes exactly the same order from (seed, epoch, position).

shuffle="global": every sample at a random position.
shuffle="block":  anchors next to each other in one episode form blocks of `block_size`
                  (an episode's last block is filled up with its first anchors, so a
                  block never spans two episodes); the block order is shuffled and so is
                  the order inside each block. Neighbouring samples then land in the same batch, so
                  they share page-cache pages and one GOP decode (see PatternDataset).
shuffle="none":   manifest order.

Ranks take blocks round robin (rank r: blocks r, r+W, ...), so each rank keeps whole
blocks. Every rank yields the same number of samples: the largest rank's share, the
others wrapping around to repeat a few (like torch's DistributedSampler padding), or
with drop_last the smallest share (the longer ranks drop their last few).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from robodata.config import require
from robodata.dataset.index import Anchor, SampleIndex, _splitmix

SHUFFLES = ("global", "block", "none")


class FeistelPermutation:
    """A bijection of [0, n) keyed by `key`: permutation(i) without materialising it."""

    def __init__(self, n: int, key: int, rounds: int = 4):
        self.n = n
        bits = max(2, (max(n, 2) - 1).bit_length())
        self.half = (bits + 1) // 2
        self.mask = (1 << self.half) - 1
        self.keys = [_splitmix(key * 0x100000001B3 + r) for r in range(rounds)]

    def __call__(self, x: int) -> int:
        if self.n <= 1:
            return x
        half, mask = self.half, self.mask
        while True:
            left, right = x >> half, x & mask
            for k in self.keys:
                left, right = right, left ^ (_splitmix(right ^ k) & mask)
            x = (left << half) | right
            if x < self.n:
                return x

    def inverse(self, y: int) -> int:
        """The x with self(x) == y."""
        if self.n <= 1:
            return y
        half, mask = self.half, self.mask
        while True:
            left, right = y >> half, y & mask
            for k in reversed(self.keys):
                left, right = right ^ (_splitmix(left ^ k) & mask), left
            y = (left << half) | right
            if y < self.n:
                return y


class PatternSampler(Sampler[Anchor]):
    """Seeded, resumable, rank-aware order over a SampleIndex (see the module docstring).

    Args:
        index: the samples to order (PatternDataset.index).
        seed: permutation seed; the same (seed, epoch) gives the same order.
        rank, world_size: this rank's share of whole blocks (rank r takes blocks r, r+W, ...).
        shuffle: "global", "block" or "none".
        block_size: neighbouring anchors per block with shuffle="block".
        drop_last: every rank yields the smallest share instead of wrapping to the largest.

    Raises:
        ConfigError: unknown shuffle, rank outside [0, world_size), block_size < 1.
    """

    def __init__(
        self,
        index: SampleIndex,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        shuffle: str = "global",
        block_size: int = 8,
        drop_last: bool = False,
    ):
        require(shuffle in SHUFFLES, f"shuffle must be one of {SHUFFLES}, got {shuffle!r}")
        require(world_size >= 1 and 0 <= rank < world_size, f"bad rank {rank} for world_size {world_size}")
        require(block_size >= 1, "block_size must be >= 1")
        self.index = index
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.shuffle = shuffle
        self.block_size = block_size if shuffle == "block" else 1
        self.drop_last = drop_last
        self.epoch = 0
        self.position = 0  # samples of this epoch already yielded on this rank
        self._pcum = None
        self._n = len(index)
        if self.block_size > 1 and len(index):
            # Blocks never cross episodes: each episode's anchors are padded to whole blocks
            # (the padding repeats its first anchors), so every block is B neighbours of one episode.
            padded = -(-index.counts // self.block_size) * self.block_size
            self._pcum = np.cumsum(padded)
            self._n = int(self._pcum[-1])

    def __len__(self) -> int:
        counts = self._rank_counts()
        return min(counts) if self.drop_last else max(counts)

    def _rank_counts(self) -> list[int]:
        """Samples each rank owns this epoch (whole blocks; one block may be partial)."""
        n, bs, w = self._n, self.block_size, self.world_size
        nb = -(-n // bs)
        counts = [(nb // w + (1 if r < nb % w else 0)) * bs for r in range(w)]
        if nb and n % bs:
            pos = self._blocks(nb).inverse(nb - 1) if self.shuffle != "none" else nb - 1
            counts[pos % w] -= bs - n % bs
        return counts

    def _key(self) -> int:
        return _splitmix(self.seed * 0x9E3779B1 + self.epoch)

    def _blocks(self, nb: int) -> FeistelPermutation:
        return FeistelPermutation(nb, self._key())

    def set_epoch(self, epoch: int) -> None:
        """Switch to `epoch`'s order (its position restarts at 0 when the epoch changes)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = 0

    # ---------------------------------------------------------------- order
    def order(self, start: int = 0) -> Iterator[int]:
        """Sample ids of this rank for the current epoch, from position `start` on.

        Skipping to `start` costs one permutation step per skipped block, not per sample."""
        n = self._n
        if n == 0:
            return
        bs = self.block_size
        nb = -(-n // bs)
        key = self._key()
        blocks = self._blocks(nb) if self.shuffle != "none" else (lambda b: b)
        limit = len(self)
        k, yielded = (start, start) if bs == 1 else (0, 0)
        while yielded < limit:
            b = blocks((k * self.world_size + self.rank) % nb)
            k += 1
            size = min(bs, n - b * bs)
            if yielded + size <= start:  # whole block before the resume point
                yielded += size
                continue
            inner = FeistelPermutation(size, key ^ _splitmix(b)) if size > 1 else (lambda i: i)
            for i in range(size):
                if yielded >= limit:
                    return
                if yielded >= start:
                    yield self._sample(b * bs + inner(i))
                yielded += 1

    def _sample(self, q: int) -> int:
        """Padded block-space id -> sample id."""
        if self._pcum is None:
            return q
        idx = self.index
        row = int(np.searchsorted(self._pcum, q, side="right"))
        j = q - (int(self._pcum[row - 1]) if row else 0)
        base = int(idx.cum[row - 1]) if row else 0
        return base + j % int(idx.counts[row])

    def __iter__(self) -> Iterator[Anchor]:
        pos = self.position
        for sample in self.order(pos):
            pos += 1
            self.position = pos
            yield self.index.locate(sample, self.seed, self.epoch)
        self.position = 0  # epoch finished: the next iteration starts the epoch over (call set_epoch)

    # ---------------------------------------------------------------- Stateful
    def state_dict(self) -> dict[str, Any]:
        """Where this rank is. With a DataLoader, samples prefetched but not yet trained on
        count as yielded; use `state_at(consumed)` with the trainer's own count instead."""
        return self.state_at(self.position)

    def state_at(self, consumed: int) -> dict[str, Any]:
        """Resume state as if exactly `consumed` samples of this epoch had been drawn (a loader
        prefetches ahead of what the trainer consumed; this is the trainer's position)."""
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "position": int(consumed),
            "rank": self.rank,
            "world_size": self.world_size,
            "shuffle": self.shuffle,
            "block_size": self.block_size,
            "num_samples": len(self.index),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict()` / `state_at()` output.

        Raises:
            ConfigError: the state was saved with another seed, world size, shuffle, block size
                or number of samples.
        """
        for k in ("seed", "world_size", "shuffle", "block_size", "num_samples"):
            mine = len(self.index) if k == "num_samples" else getattr(self, k)
            require(state[k] == mine, f"sampler state was saved with {k}={state[k]!r}, this sampler has {mine!r}")
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
