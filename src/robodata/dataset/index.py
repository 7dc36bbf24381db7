"""SampleIndex: every (episode, anchor) sample of a manifest under a ReadPattern.

Per-episode sample counts come from duration and stream rates (vectorised over the
manifest; stream_rates_json is parsed once per distinct value), so building the index of
a million-row manifest takes well under a second and holds a few bytes per episode.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robodata.catalog.schema import stream_rates
from robodata.dataset.pattern import ReadPattern, stream_rate
from robodata.errors import ConfigError


@dataclass(frozen=True)
class Anchor:
    row: int  # manifest row
    t: float  # seconds from episode start


def in_split(manifest: pa.Table, split: str) -> pa.Table:
    """The manifest's rows of `split`.

    Raises:
        ConfigError: the manifest has rows but none in `split` (all val/test, say): an empty
            dataset would only fail later, or train on nothing without a word.
    """
    rows = manifest.filter(pc.equal(manifest.column("split"), split))
    if manifest.num_rows and not rows.num_rows:
        held = pc.value_counts(manifest.column("split")).to_pylist()
        splits = ", ".join(f"{d['values']!r}: {d['counts']}" for d in held[:8])
        raise ConfigError(
            f"none of the manifest's {manifest.num_rows} rows is in split {split!r} (it holds {splits}); "
            "choose the split to read (DatasetConfig(split=...), --split)"
        )
    return rows


def _shown(raw: str) -> str:
    return repr(raw) if len(raw) <= 80 else repr(raw[:77] + "...")


def _splitmix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class SampleIndex:
    """Every (episode, anchor) sample of a manifest under a pattern, a few bytes per episode.

    Args:
        manifest: rows with duration_s and stream_rates_json (and weight, when use_weights).
        pattern: the read pattern whose windows must fit inside each episode.
        use_weights: see below.

    Raises:
        ConfigError: the pattern reads a stream every episode lacks, or unusable weights.

    Episodes that lack a stream the pattern reads (or hold it at rate 0), or whose
    stream_rates_json does not parse (robodata.catalog.schema.stream_rates), get no samples; they
    are counted in `unusable` (reason -> episodes) and reported with a warning.

    `use_weights`: honour the manifest's `weight` column (the curation spec's mixing
    shares): episode i gets round(weight_i / sum(weight) * N) samples instead of its
    natural anchor count (N = total natural anchors), by skipping or repeating anchors
    evenly. Weights proportional to the natural counts change nothing."""

    def __init__(self, manifest: pa.Table, pattern: ReadPattern, use_weights: bool = False):
        self.pattern = pattern
        n = manifest.num_rows
        duration = manifest.column("duration_s").to_numpy(zero_copy_only=False).astype(np.float64)
        rates_col = manifest.column("stream_rates_json")
        uniq = pc.unique(rates_col)
        codes = pc.index_in(rates_col, value_set=uniq).to_numpy(zero_copy_only=False)
        lo_off = np.zeros(len(uniq))
        hi_off = np.zeros(len(uniq))
        grid = np.zeros(len(uniq))
        unusable = np.zeros(len(uniq), dtype=bool)
        why: dict[int, str] = {}
        for g, raw in enumerate(uniq.to_pylist()):
            try:
                rates = stream_rates(raw)
            except ValueError as exc:  # a bad row is skipped and reported, never the whole manifest refused
                unusable[g] = True
                why[g] = f"stream_rates_json {_shown(raw)} is invalid ({exc})"
                continue
            missing = sorted({s for w in pattern.windows for s in w.streams if not stream_rate(rates.get(s))})
            if missing:  # these episodes cannot serve the pattern: no samples, reported
                unusable[g] = True
                why[g] = f"pattern {pattern.name!r} reads {missing}, which episodes with stream rates {raw} do not have"
                continue
            lo, hi, gr = self._offsets(rates, raw or "")
            lo_off[g], hi_off[g], grid[g] = lo, hi, gr
        bad_rows = unusable[codes] if n else np.zeros(0, dtype=bool)
        if n and bad_rows.all():
            raise ConfigError(why[int(codes[0])] + " (no episode of the manifest can serve it)")
        # reason -> episodes left out (skipped and reported, never the whole manifest refused)
        self.unusable = {why[g]: int((codes == g).sum()) for g in why}
        if self.unusable:
            warnings.warn(
                f"{int(bad_rows.sum())} of {n} episodes cannot serve the read pattern and are skipped: "
                + "; ".join(f"{k} ({v})" for k, v in self.unusable.items()),
                stacklevel=2,
            )
        # Per row only what differs per row (~28 bytes: 1.4 GB at 50M episodes): the stream-rate
        # group's code, the last anchor time, counts and their running sum; offsets and the video
        # grid are per group.
        self._codes = codes.astype(np.int32)
        self._lo_g, self._grid_g = lo_off, grid
        lo = lo_off[codes]
        a_hi = duration - hi_off[codes]
        stride = pattern.anchor_stride_s
        span = a_hi - lo
        del lo
        counts = np.where(span >= -1e-9, np.floor(np.maximum(span, 0) / stride + 1e-9) + 1, 0).astype(np.int64)
        counts[bad_rows] = 0
        self._hi = a_hi
        self.native = counts
        if n and not counts.any():  # every usable episode is shorter than the pattern's span
            warnings.warn(
                f"no episode of the manifest is long enough for pattern {pattern.name!r} (longest "
                f"{duration.max():.2f} s): the dataset is empty",
                stacklevel=2,
            )
        elif use_weights and "weight" in manifest.column_names and n:
            w = manifest.column("weight").to_numpy(zero_copy_only=False).astype(np.float64)
            if np.any(~np.isfinite(w)) or np.any(w < 0) or w[counts > 0].sum() <= 0:
                raise ConfigError("manifest weights must be finite, >= 0 and not all 0 on usable episodes")
            w = np.where(counts > 0, w, 0.0)
            counts = np.floor(w / w.sum() * counts.sum() + 0.5).astype(np.int64)
        self.counts = counts
        self.cum = np.cumsum(counts)
        self.num_episodes = n
        self._stride = stride

    def _offsets(self, rates: dict[str, float], raw: str) -> tuple[float, float, float]:
        """(lead, tail, video grid) of the pattern's windows at these rates (every stream present)."""
        lo, hi, grid = 0.0, 0.0, 0.0
        for w in self.pattern.windows:
            rate = min(stream_rate(rates[s]) for s in w.streams)
            a, b = w.span_s(rate)
            lo, hi = max(lo, -a), max(hi, b)
            if w.kind == "video" and not grid:
                grid = rate / w.every
        return lo, hi, grid

    def usable(self, row: int) -> bool:
        """Whether manifest row `row` has samples under the pattern."""
        return bool(self.native[row] > 0)

    def __len__(self) -> int:
        return int(self.cum[-1]) if len(self.cum) else 0

    def locate(self, sample: int, seed: int = 0, epoch: int = 0) -> Anchor:
        """The Anchor of sample id `sample` (jittered by seed and epoch when the pattern says so).

        Raises:
            IndexError: sample outside [0, len(self)).
        """
        if not 0 <= sample < len(self):
            raise IndexError(f"sample {sample} out of range [0, {len(self)})")
        row = int(np.searchsorted(self.cum, sample, side="right"))
        slot = sample - (int(self.cum[row - 1]) if row else 0)
        native, want = int(self.native[row]), int(self.counts[row])
        if want != native:  # weighted: spread `want` samples evenly over the `native` anchors
            slot = slot * native // want if want <= native else slot % native
        code = self._codes[row]
        lo = float(self._lo_g[code])
        t = lo + slot * self._stride
        if self.pattern.anchor_jitter:
            room = min(self._stride, self._hi[row] - t)
            u = _splitmix(_splitmix(seed * 1_000_003 + epoch) ^ sample) / 2.0**64
            t += u * max(room, 0.0)
        g = float(self._grid_g[code])
        if g > 0:  # snap onto the first video window's sample grid
            snapped = math.floor(t * g + 1e-6) / g
            if snapped < lo - 1e-9:
                snapped += 1.0 / g
            t = snapped
        return Anchor(row, float(t))
