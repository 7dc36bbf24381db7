"""bench.mixing's timing: the mixed manifest against single-corpus manifests of its size, reading the
same samples, interleaved batch by batch.

The mixed side reads the sample ids in batches of `batch` through MixedDataset.batch. The single side
reads the same samples (each one's episode and anchor time) from single-corpus manifests: per corpus
(binding group), a manifest of the mixed manifest's size (the group's rows repeated under other ids:
same containers, as many rows; each sample on one of its row's copies, at random), read by the plain
PatternDataset with the ReadPattern of its streams in full batches of `batch` (a group's last batch is
filled up with more of its own samples and its time scaled back to its share).

A machine shared with other work changes speed by a factor of two within seconds (the same decode
costs twice the CPU seconds minutes apart), so a side timed after the other measures the load as
much as the code. Here the two sides' batches alternate (spread evenly over a round, which side goes
first alternating between rounds), each batch timed alone in wall and CPU seconds; a warm-up round
(readers opened, decoders made) is not counted. Each batch is read once a round: its least time over
the `rounds` is its cost with the least interference (the work itself is in every round; other
programs' only add), so each side's seconds are the sum of its batches' least times, and the ratio
is single seconds over mixed seconds (> 1 when the mixed manifest is faster). The median of the
rounds' ratios and each round's are reported beside it.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Side:
    """One side's batches: (call, weight): the call reads one batch, weight scales its seconds."""

    batches: list[tuple[Callable[[], Any], float]] = field(default_factory=list)
    rounds: list[np.ndarray] = field(default_factory=list)  # per counted round: (batches, 2) wall, cpu seconds

    @property
    def wall(self) -> list[float]:  # per counted round
        return [float(r[:, 0].sum()) for r in self.rounds]

    @property
    def cpu(self) -> list[float]:
        return [float(r[:, 1].sum()) for r in self.rounds]

    def least(self) -> tuple[float, float]:
        """(wall, cpu): the sums of each batch's least seconds over the rounds."""
        best = np.min(np.stack(self.rounds), axis=0)
        return float(best[:, 0].sum()), float(best[:, 1].sum())


def mixed_side(ds: Any, ids: np.ndarray, batch: int) -> Side:
    side = Side()
    for lo in range(0, len(ids), batch):
        keys = ids[lo : lo + batch].tolist()
        side.batches.append((functools.partial(ds.batch, keys), 1.0))
    return side


def single_side(ds: Any, manifest: Any, ids: np.ndarray, batch: int, seed: int = 1) -> tuple[Side, list[Any]]:
    """The single-corpus side (see the module docstring), and its datasets (to close)."""
    import pyarrow as pa

    from robodata.dataset.dataset import DatasetConfig, PatternDataset
    from robodata.dataset.index import Anchor

    rng = np.random.default_rng(seed)
    per_group: dict[int, list[int]] = {}
    for k in ids:
        g, local = ds.locate(int(k))
        per_group.setdefault(g, []).append(local)
    side, datasets = Side(), []
    for g, locals_ in sorted(per_group.items()):
        group = ds.groups[g]
        n_rows = len(group.rows)
        reps = -(-manifest.num_rows // n_rows)
        table = manifest.take(pa.array(np.tile(group.rows, reps)[: manifest.num_rows]))
        eids = [f"{e}~{i}" for i, e in enumerate(table.column("episode_id").to_pylist())]
        table = table.set_column(table.column_names.index("episode_id"), "episode_id", pa.array(eids))
        # rows repeated under other ids share containers: the footer's episode id is not theirs
        single = PatternDataset(table, group.data.pattern, config=DatasetConfig(split=None, check_episode_ids=False))
        datasets.append(single)
        want = len(locals_)
        full = -(-want // batch) * batch
        locals_ = locals_ + rng.integers(0, len(group.data), full - want).tolist()
        anchors = []
        for local in locals_:
            a = group.data.index.locate(int(local), group.data.config.seed)
            copies = (manifest.num_rows - a.row + n_rows - 1) // n_rows  # copies of row a.row in `table`
            anchors.append(Anchor(a.row + n_rows * int(rng.integers(0, copies)), a.t))
        for lo in range(0, full, batch):
            part = anchors[lo : lo + batch]
            side.batches.append((functools.partial(single.batch, part, shared=False), want / full))
    order = rng.permutation(len(side.batches))  # corpora interleaved, as a mixed stream of batches has them
    side.batches = [side.batches[i] for i in order]
    return side, datasets


def interleaved(a: Side, b: Side, rounds: int) -> None:
    """Run `rounds` + 1 rounds (the first a warm-up), each side's batches alternating with the other's
    in proportion, the side that goes first alternating; each side's seconds per counted round in
    its `wall` / `cpu`."""
    for r in range(rounds + 1):
        first, second = (a, b) if r % 2 else (b, a)
        steps = sorted(
            [
                ((i + 0.5) / len(s.batches), n, s, i)
                for n, s in enumerate((first, second))
                for i in range(len(s.batches))
            ],
            key=lambda x: (x[0], x[1]),
        )
        times = {id(a): np.zeros((len(a.batches), 2)), id(b): np.zeros((len(b.batches), 2))}
        for _, _, side, i in steps:
            call, weight = side.batches[i]
            w0, c0 = time.perf_counter(), time.process_time()
            call()
            times[id(side)][i] = ((time.perf_counter() - w0) * weight, (time.process_time() - c0) * weight)
        if r:
            for side in (a, b):
                side.rounds.append(times[id(side)])


def ratios(mixed: Side, single: Side) -> dict[str, Any]:
    """The ratios (single seconds / mixed seconds) of each side's least seconds, wall and CPU, and
    the median of the rounds' wall ratios with each round's (see the module docstring)."""
    (mw, mc), (sw, sc) = mixed.least(), single.least()
    rounds = [s / m for s, m in zip(single.wall, mixed.wall, strict=True)]
    return {
        "mixed_vs_single": round(sw / mw, 3),
        "mixed_vs_single_cpu": round(sc / mc, 3),
        "mixed_vs_single_median_round": round(statistics.median(rounds), 3),
        "mixed_vs_single_rounds": [round(x, 3) for x in rounds],
        "wall_s_mixed": round(mw, 3),
        "cpu_s_mixed": round(mc, 3),
        "wall_s_single": round(sw, 3),
        "cpu_s_single": round(sc, 3),
    }
