"""MixedDataset: one dataset over a manifest that mixes corpora, batches of one shape.

Rows are bound to a MixPattern's roles (robodata.dataset.mixpattern) and grouped by binding (a
few groups: one per corpus and camera set); each group is read by a PatternDataset over its own
rows with the ReadPattern of its streams, so reading, decoding and skipping are the loader's.
Every batch holds, per role:

* a camera role `<role>`: uint8 (B, T, H, W, 3) at the pattern's `resize`; a row without that
  camera gives zeros, `<role>_present` (B,) False;
* `state` / `action`: float32 (B, T, D) padded with zeros to the manifest's largest `state_dim` /
  `action_dim`, `<role>_mask` (B, D) True on the row's own dimensions, `<role>_present` (B,);
* `<role>_is_pad` (B, T): True where a step fell outside the episode or the row lacks the role;
* `corpus` (B,) int64 (index into `corpora`), `episode_index` (B,) manifest row, `t` (B,) seconds.

Each window is at the pattern's rate `hz`, each corpus's samples resampled to it (the nearest
native sample to each step). With `stats` (robodata.dataset.normstats, per corpus) and
`normalize=True` the state and action are returned as (x - mean) / std of their corpus, on the
real dimensions only; `stats` stays on the dataset either way.

Sampling honours the manifest's `weight` (the spec's mix, e.g. by `source_dataset`): each group's
share of the samples is its rows' share of the weight, spread as SampleIndex spreads it. Rows that
cannot serve the pattern (none of its roles, shorter than its span) are counted in `unusable`
with their reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import get_worker_info

from robodata.dataset.dataset import DatasetConfig, PatternDataset, _Batch
from robodata.dataset.mixpattern import ARRAY_ROLES, Binding, MixPattern, bind, concrete, roles_of
from robodata.dataset.normstats import corpus_names
from robodata.dataset.ring import Arena, slot_size
from robodata.errors import ConfigError

EPS = 1e-8


class _Group:
    def __init__(self, rows: np.ndarray, binding: Binding, data: PatternDataset, picks: dict[str, list[int]]):
        self.rows, self.binding, self.data, self.picks = rows, binding, data, picks


class MixedDataset:
    """See the module docstring. `manifest`: rows with the mixing facts (read_manifest gives them)."""

    def __init__(
        self,
        manifest: pa.Table,
        pattern: MixPattern,
        cache: Any = None,
        config: DatasetConfig | None = None,
        stats: dict[str, Any] | None = None,
        normalize: bool = False,
    ):
        cfg = config or DatasetConfig()
        if cfg.split is not None and "split" in manifest.column_names:
            manifest = manifest.filter(pc.equal(manifest.column("split"), cfg.split))
        self.manifest, self.pattern, self.config = manifest, pattern, cfg
        self.stats, self.normalize = stats, normalize
        if normalize and stats is None:
            raise ConfigError("normalize=True needs the manifest's statistics (robodata.dataset.normstats)")
        names = corpus_names(manifest)
        self.corpora = sorted(set(names))
        self._corpus = np.array([self.corpora.index(c) for c in names], np.int64)
        self.dims = {r: _max_dim(manifest, f"{r}_dim") for r in ARRAY_ROLES}
        self.unusable: dict[str, int] = {}
        self.groups: list[_Group] = []
        self._bind_groups(manifest, cache, replace(cfg, split=None))
        self._weigh(manifest)

    def _bind_groups(self, manifest: pa.Table, cache: Any, sub: DatasetConfig) -> None:
        def col(name: str, default: Any) -> list[Any]:
            return manifest.column(name).to_pylist() if name in manifest.column_names else [default] * manifest.num_rows

        keys = zip(
            col("cameras", []),
            col("camera_roles", []),
            col("state_stream", ""),
            col("action_stream", ""),
            col("stream_rates_json", "{}"),
            strict=True,
        )
        by: dict[Binding, list[int]] = {}
        for row, (cams, roles, st, ac, rates) in enumerate(keys):
            b = bind(self.pattern, cams or [], roles or [], st or "", ac or "", rates or "{}")
            why = b.why_unusable()
            if why:
                self.unusable[why] = self.unusable.get(why, 0) + 1
            else:
                by.setdefault(b, []).append(row)
        if not by:
            raise ConfigError(f"no row of the manifest can serve mix pattern {self.pattern.name!r}: {self.unusable}")
        for b, rows in by.items():
            read, picks = concrete(self.pattern, b)
            idx = np.asarray(rows, np.int64)
            data = PatternDataset(manifest.take(pa.array(idx)), read, cache=cache, config=sub)
            short = int((data.index.native == 0).sum())
            if short:
                why = f"shorter than the pattern's span ({_span(self.pattern):.2f} s)"
                self.unusable[why] = self.unusable.get(why, 0) + short
            self.groups.append(_Group(idx, b, data, picks))

    def _weigh(self, manifest: pa.Table) -> None:
        natural = np.array([len(g.data) for g in self.groups], np.float64)
        if self.config.use_weights and "weight" in manifest.column_names:
            w = manifest.column("weight").to_numpy(zero_copy_only=False).astype(np.float64)
            share = np.array([w[g.rows][g.data.index.native > 0].sum() for g in self.groups])
            if not np.isfinite(share).all() or share.sum() <= 0:
                raise ConfigError("manifest weights must be finite, >= 0 and not all 0 on usable rows")
            want = np.floor(share / share.sum() * natural.sum() + 0.5)
        else:
            want = natural
        self.counts = want.astype(np.int64)
        self.cum = np.cumsum(self.counts)
        self.index = MixedIndex(self._row_counts())

    def _row_counts(self) -> np.ndarray:
        """Samples per episode in sample-id order: a group's ids map onto its own samples in order
        (`locate`), so each episode's ids are contiguous and PatternSampler's blocks keep to one."""
        parts = []
        for g, group in enumerate(self.groups):
            n, want = len(group.data), int(self.counts[g])
            hi = group.data.index.cum.astype(np.int64)
            lo = hi - group.data.index.counts
            # the first of the group's ids that maps at or past local sample x is ceil(x * want / n)
            parts.append(_ceil_div(hi * want, max(n, 1)) - _ceil_div(lo * want, max(n, 1)))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return int(self.cum[-1]) if len(self.cum) else 0

    def locate(self, sample: int) -> tuple[int, int]:
        """(group, the group's own sample id) of sample `sample`."""
        if not 0 <= sample < len(self):
            raise IndexError(f"sample {sample} out of range [0, {len(self)})")
        g, local = self._locate_many([sample])
        return int(g[0]), int(local[0])

    def _locate_many(self, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """`locate` over a batch's keys at once: (groups, the groups' own sample ids)."""
        k = np.asarray(keys, np.int64).reshape(-1)
        if len(k) and (k.min() < 0 or k.max() >= len(self)):
            bad = int(k[(k < 0) | (k >= len(self))][0])
            raise IndexError(f"sample {bad} out of range [0, {len(self)})")
        g = np.searchsorted(self.cum, k, side="right")
        j = k - np.where(g > 0, self.cum[np.maximum(g - 1, 0)], 0)
        n = np.array([len(x.data) for x in self.groups], np.int64)[g]
        return g, j * n // np.maximum(self.counts[g], 1)  # in order: a group's ids spread over its samples

    def __getitems__(self, keys: Sequence[int]) -> list[dict[str, Any]]:
        batch = self.batch(keys)
        return [{k: v[i] for k, v in batch.items()} for i in range(len(keys))]

    def __getitem__(self, key: int) -> dict[str, Any]:
        return self.__getitems__([key])[0]

    def batch(
        self, keys: Sequence[int], shared: bool | None = None, arena: Arena | None = None
    ) -> dict[str, torch.Tensor]:
        """One batch of samples `keys` (ints in [0, len)); see the module docstring for its keys.
        `shared` / `arena` as for PatternDataset.batch: in a DataLoader worker the tensors live in
        shared memory (or a reused batch slot, robodata.dataset.loader) from the start."""
        if shared is None:
            shared = get_worker_info() is not None
        store = _Batch(len(keys), shared, arena)
        out = {name: _filled(store.array(name, shape, dtype), fill) for name, shape, dtype, fill in self._layout()}
        groups, local = self._locate_many(keys)
        for g in np.unique(groups).tolist():  # one PatternDataset batch per binding group
            at = np.flatnonzero(groups == g)
            self._fill(self.groups[g], at, local[at].tolist(), out)
        # numpy while filling (its indexing costs a fraction of torch's on small arrays), views of the tensors
        return store.tensors

    def _layout(self) -> list[tuple[str, tuple[int, ...], torch.dtype, int]]:
        """(name, per-sample shape, dtype, fill value) of every batch tensor."""
        out: list[tuple[str, tuple[int, ...], torch.dtype, int]] = []
        for role in roles_of(self.pattern):
            w = self.pattern.window(role)
            if role in ARRAY_ROLES:
                out.append((role, (w.length, self.dims[role]), torch.float32, 0))
                out.append((f"{role}_mask", (self.dims[role],), torch.bool, 0))
            else:
                h, wd = self.pattern.resize or (0, 0)
                out.append((role, (w.length, h, wd, 3), torch.uint8, 0))
            out.append((f"{role}_is_pad", (w.length,), torch.bool, 1))
            out.append((f"{role}_present", (), torch.bool, 0))
        out += [("corpus", (), torch.int64, 0), ("episode_index", (), torch.int64, 0), ("t", (), torch.float64, 0)]
        return out

    def slot_bytes(self, keys: Sequence[int], min_bytes: int) -> int:
        """What a batch slot (robodata.dataset.ring) needs for a batch of `keys`: the batch's shape
        is the pattern's, whatever the corpora."""
        size = {torch.float32: 4, torch.float64: 8, torch.int64: 8, torch.uint8: 1, torch.bool: 1}
        sizes = [len(keys) * int(np.prod(shape, dtype=np.int64)) * size[dt] for _, shape, dt, _ in self._layout()]
        return slot_size(sizes, min_bytes)

    def _fill(self, group: _Group, at: np.ndarray, ids: list[int], out: dict[str, np.ndarray]) -> None:
        got = group.data.batch(ids, shared=False)
        rows = group.rows[got["episode_index"].numpy()]
        out["episode_index"][at] = rows
        out["t"][at] = got["t"].numpy()
        corpus = self._corpus[rows]
        out["corpus"][at] = corpus
        for role, stream in group.binding.streams:
            if stream is None:
                continue
            data, pad = got[stream].numpy(), got[f"{stream}_is_pad"].numpy()
            pick = group.picks[stream]
            if pick != list(range(data.shape[1])):  # a ratio that is not an integer
                data, pad = data[:, pick], pad[:, pick]
            out[f"{role}_is_pad"][at] = pad
            out[f"{role}_present"][at] = True
            if role not in ARRAY_ROLES:
                out[role][at] = data
                continue
            x = data.reshape(len(at), data.shape[1], -1)
            d = x.shape[-1]
            if d > self.dims[role]:
                raise ConfigError(
                    f"{role} stream {stream!r} has {d} dimensions; the manifest's {role}_dim says at most "
                    f"{self.dims[role]}"
                )
            out[role][at, :, :d] = self._normalized(x, corpus, role) if self.normalize else x
            out[f"{role}_mask"][at, :d] = True

    def _normalized(self, x: np.ndarray, corpus: np.ndarray, role: str) -> np.ndarray:
        assert self.stats is not None
        d = x.shape[-1]
        y = x.astype(np.float64)
        for c in np.unique(corpus).tolist():
            s = self.stats.get(self.corpora[c], {}).get(role)
            if s is None:
                raise ConfigError(f"statistics have no {role} of corpus {self.corpora[c]!r}")
            sel = corpus == c
            mean, std = np.asarray(s["mean"][:d]), np.maximum(np.asarray(s["std"][:d]), EPS)
            y[sel] = (y[sel] - mean) / std
        return y.astype(np.float32)

    def close(self) -> None:
        for g in self.groups:
            g.data.close()


class MixedIndex:
    """A MixedDataset's samples for PatternSampler: ids [0, len), `counts` per episode in id order
    (PatternSampler's blocks keep to one episode), `locate` the id itself (MixedDataset's keys are ints)."""

    def __init__(self, counts: np.ndarray):
        self.counts = counts.astype(np.int64)
        self.cum = np.cumsum(self.counts)

    def __len__(self) -> int:
        return int(self.cum[-1]) if len(self.cum) else 0

    def locate(self, sample: int, seed: int = 0, epoch: int = 0) -> int:
        if not 0 <= sample < len(self):
            raise IndexError(f"sample {sample} out of range [0, {len(self)})")
        return int(sample)


def _ceil_div(a: np.ndarray, b: int) -> np.ndarray:
    return -(-a // b)


def _filled(a: np.ndarray, value: int) -> np.ndarray:
    a.fill(value)  # batch memory is reused (slots) or fresh: padding must be written
    return a


def _max_dim(manifest: pa.Table, column: str) -> int:
    if column not in manifest.column_names:
        return 0
    return int(pc.max(manifest.column(column)).as_py() or 0)


def _span(pattern: MixPattern) -> float:
    ws = [pattern.window(r) for r in roles_of(pattern)]
    return (max(w.offset + w.length - 1 for w in ws) - min(w.offset for w in ws)) / pattern.hz
