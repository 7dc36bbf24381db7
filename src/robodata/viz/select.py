"""What `robodata view` shows: a container, a manifest row, or one loader sample.

A sample is drawn exactly as training draws it: the manifest's PatternDataset under a read
pattern, PatternSampler's order (seed, shuffle, epoch), and PatternDataset.batch for its tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from robodata.container import EpisodeReader
from robodata.container.rows import check_episode, refuse_uri
from robodata.errors import ConfigError


@dataclass(frozen=True)
class SampleSpec:
    """Which sample: position `position` of the sampler's order for `pattern` (a preset name)."""

    pattern: str = "wam"
    position: int = 0
    seed: int = 0
    epoch: int = 0
    shuffle: str = "global"
    split: str | None = "train"

    def __post_init__(self) -> None:
        if self.position < 0:
            raise ConfigError(f"--sample position must be >= 0, got {self.position}")


@dataclass
class DrawnSample:
    """One sample as the loader returns it, and where it came from."""

    reader: EpisodeReader
    row: int
    t: float  # anchor, seconds from the episode's start
    tensors: dict[str, Any]  # {name: tensor without the batch dimension}
    times: dict[str, np.ndarray]  # stream -> the target times (s) of each returned step
    window: tuple[float, float]  # [first, last] target time over all streams


def open_row(manifest_path: str, index: int | None, episode: str | None) -> EpisodeReader:
    """The container of manifest row `index`, or of the row whose episode_id is `episode`.

    Raises:
        ConfigError: neither or both given, index out of range, or no such episode.
        ManifestError: the file is not a readable manifest.
        ContainerError: the container cannot be opened, the row's uri is not one a manifest may
            name, or the container holds another episode (robodata.container.rows).
    """
    from robodata.curate.manifest import read_manifest

    if (index is None) == (episode is None):
        raise ConfigError("give exactly one of --index N and --episode ID with a manifest")
    table = read_manifest(manifest_path)
    if episode is not None:
        ids = table.column("episode_id").to_pylist()
        if episode not in ids:
            raise ConfigError(f"{manifest_path}: no episode {episode!r} in the manifest")
        index = ids.index(episode)
    assert index is not None
    if not 0 <= index < table.num_rows:
        raise ConfigError(f"{manifest_path}: --index {index} outside [0, {table.num_rows})")
    row = table.slice(index, 1).to_pylist()[0]
    refuse_uri(row["uri"] or "")
    reader = EpisodeReader.open(
        row["uri"], footer_offset=row.get("footer_offset"), footer_length=row.get("footer_length")
    )
    check_episode(reader, row["episode_id"])
    return reader


def draw_sample(manifest_path: str, spec: SampleSpec) -> DrawnSample:
    """The sample at `spec.position` of the sampler's order, with the tensors the loader returns.

    Raises:
        ConfigError: an unknown pattern, or a position past the sampler's length.
        ManifestError, ContainerError: as PatternDataset.
    """
    from robodata.dataset.dataset import DatasetConfig, PatternDataset
    from robodata.dataset.sampler import PatternSampler

    ds = PatternDataset.from_manifest(manifest_path, spec.pattern, config=DatasetConfig(split=spec.split))
    sampler = PatternSampler(ds.index, seed=spec.seed, shuffle=spec.shuffle)
    sampler.set_epoch(spec.epoch)
    if spec.position >= len(sampler):
        raise ConfigError(f"--sample {spec.position} is past the sampler's {len(sampler)} samples")
    sample_id = next(iter(sampler.order(spec.position)))
    anchor = ds.index.locate(sample_id, spec.seed, spec.epoch)
    batch = ds.batch([anchor], shared=False)
    reader = ds.reader(anchor.row)
    times = {}
    for w in ds.pattern.windows:
        for s in w.streams:
            times[s] = ds._targets(w, reader.meta.streams[s].rate_hz, [anchor.t])[0]
    lo = min(float(t.min()) for t in times.values())
    hi = max(float(t.max()) for t in times.values())
    tensors = {k: v[0] for k, v in batch.items()}
    return DrawnSample(reader, anchor.row, anchor.t, tensors, times, (lo, hi))
