"""The real data source: robodata.dataset's PatternDataset + PatternSampler over a manifest (with
`data.mix_pattern`, a MixedDataset over a manifest mixing corpora, read by role).

Default read pattern (from the model config): `data.frames` consecutive frames of each
camera from the anchor (context frames + the next one), resized to data.image_size, the
state at the anchor and an action chunk from it; anchors every data.stride_s seconds.
"""

from __future__ import annotations

from robodata.train.config import TrainConfig
from robodata.train.source import DataSource


def default_pattern(cfg: TrainConfig):
    from robodata.dataset import ReadPattern, StreamWindow

    m, d = cfg.model, cfg.data
    if d.pattern is not None:
        return ReadPattern.from_dict(d.pattern)
    return ReadPattern(
        "train",
        (
            StreamWindow("cameras", tuple(m.cameras), "video", length=d.frames, resize=(d.image_size, d.image_size)),
            StreamWindow("state", (m.state_key,), "array", length=1),
            StreamWindow("action", (m.action_key,), "array", length=m.action_chunk),
        ),
        anchor_stride_s=d.stride_s,
    )


def build_manifest_source(cfg: TrainConfig, rank: int, world_size: int) -> DataSource:
    import fsspec
    import pyarrow.parquet as pq

    from robodata.dataset import DatasetConfig, MixedDataset, MixPattern, PatternDataset, PatternSampler
    from robodata.errors import RobodataError
    from robodata.storage import StorageLocation
    from robodata.train.lineage import manifest_lineage

    d = cfg.data
    assert d.manifest is not None
    # s3:// manifests and containers: data.storage_options, else the AWS_* variables of this process
    # (credentials stay out of the config file the launcher writes)
    opts = dict(d.storage_options) or StorageLocation.from_env(d.manifest).fsspec_options()
    try:
        with fsspec.open(d.manifest, "rb", **opts) as f:
            table = pq.read_table(f)
    except (OSError, ValueError) as exc:
        raise RobodataError(f"cannot read manifest {d.manifest!r}: {exc}") from exc
    cache = None
    if d.cache_dir:
        from robodata.cache import PageCache, PageCacheConfig

        cache = PageCache(
            PageCacheConfig(root=d.cache_dir, budget_bytes=int(d.cache_budget_gb * (1 << 30)), storage_options=opts)
        )
    ds: PatternDataset | MixedDataset
    if d.mix_pattern is not None:  # a manifest mixing corpora, read by role (robodata.dataset.mixture)
        ds = MixedDataset(
            table, MixPattern.from_dict(d.mix_pattern), cache, DatasetConfig(split=d.split, seed=cfg.seed)
        )
    else:
        ds = PatternDataset(table, default_pattern(cfg), cache, DatasetConfig(split=d.split, seed=cfg.seed))
    if len(ds) < cfg.global_batch_size:
        raise RobodataError(
            f"manifest {d.manifest} gives {len(ds)} samples (split {d.split!r}), fewer than one "
            f"global batch ({cfg.global_batch_size})"
        )
    sampler = PatternSampler(
        ds.index,  # type: ignore[arg-type]  # a MixedIndex orders int sample ids as a SampleIndex orders Anchors
        seed=cfg.seed,
        rank=rank,
        world_size=world_size,
        shuffle=d.shuffle,
        block_size=d.block_size,
        drop_last=True,
    )
    return DataSource(ds, sampler, manifest_lineage(d.manifest, table))  # read once, above
