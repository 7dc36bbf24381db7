"""bench.lerobot_peer's sample orders and their statistics against a uniform shuffle.

global: PatternSampler(shuffle="global"), a keyed permutation of every sample (what a
        LeRobotDataset user's DataLoader(shuffle=True) does): the headline.
block:  PatternSampler(shuffle="block", block_size=8): blocks of 8 neighbouring anchors of one
        episode, reported beside.

Statistics per order, over all its batches, beside the same for a uniform random permutation
(numpy, seeded): distinct episodes per batch, the fraction of consecutive samples from one
episode, the mean time between two samples of one episode in one batch, and the rank
correlation between position in the order and position in the manifest (0 for a shuffle).
"""

from __future__ import annotations

import numpy as np

from robodata.dataset import PatternSampler, SampleIndex

ORDERS = ("global", "block")


def order_keys(index: SampleIndex, order: str, block: int, seed: int = 0) -> list:
    return list(PatternSampler(index, seed=seed, shuffle=order, block_size=block))


def stats(rows: np.ndarray, ts: np.ndarray, batch: int) -> dict[str, float]:
    n = len(rows) // batch * batch
    rows, ts = rows[:n], ts[:n]
    eps, gaps = [], []
    for b in range(0, n, batch):
        r, t = rows[b : b + batch], ts[b : b + batch]
        eps.append(len(set(r.tolist())))
        for e in set(r.tolist()):
            te = np.sort(t[r == e])
            if len(te) > 1:
                gaps.append(float(np.mean(np.abs(te[:, None] - te[None, :])[np.triu_indices(len(te), 1)])))
    pos = rows.astype(np.float64) * 1e6 + ts  # manifest order: row, then time
    rank = np.argsort(np.argsort(pos))
    corr = float(np.corrcoef(np.arange(n), rank)[0, 1]) if n > 1 else 0.0
    return {
        "episodes_per_batch": round(float(np.mean(eps)), 3) if eps else 0.0,
        "same_episode_next": round(float(np.mean(rows[1:] == rows[:-1])), 4) if n > 1 else 0.0,
        "same_episode_gap_s": round(float(np.mean(gaps)), 3) if gaps else 0.0,
        "position_rank_corr": round(corr, 4),
    }


def order_statistics(index: SampleIndex, batch: int, block: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """Each order's statistics and a uniform permutation's, over every sample of the index."""
    every = [index.locate(i) for i in range(len(index))]
    rows = np.array([a.row for a in every])
    ts = np.array([a.t for a in every])
    out = {}
    for order in ORDERS:
        keys = order_keys(index, order, block, seed)
        out[order] = stats(np.array([k.row for k in keys]), np.array([k.t for k in keys]), batch)
    perm = np.random.default_rng(seed).permutation(len(every))
    out["uniform"] = stats(rows[perm], ts[perm], batch)
    return out
