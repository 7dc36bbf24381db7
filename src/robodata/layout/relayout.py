"""Re-lay one catalog partition into a plan's layout.

For each row (streamed in record batches, so memory does not grow with the partition):
skip it if it is already in the plan's layout, else write `<episode>.<layout_version>.rdep`
beside the old object (rewrite: temp name, full verification, atomic rename; an existing
verified copy from an interrupted run is reused), and collect a pointer update. Pointers
are flipped in one Delta merge per `merge_every` episodes, only for verified objects. One
bad episode is recorded and skipped; it never fails the partition. Old objects are left
in place (readers holding an old manifest keep working); deleting them is a separate,
later retention decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow.dataset as ds
from deltalake import DeltaTable

from robodata.config import require
from robodata.container import EpisodeReader
from robodata.container.plan import LayoutPlan
from robodata.errors import ContainerError, RobodataError
from robodata.layout.pointer import PointerUpdate, flip_pointers
from robodata.layout.rewrite import rewrite, sibling_uri, verify

COLUMNS = ["episode_id", "uri", "day", "layout_version", "footer_offset", "footer_length"]


@dataclass(frozen=True)
class RelayoutConfig:
    catalog_uri: str
    plan_path: str
    min_psnr_db: float = 30.0
    merge_every: int = 500
    max_episodes: int = 0  # 0: the whole partition
    storage_options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(bool(self.catalog_uri), "relayout needs catalog_uri")
        require(bool(self.plan_path), "relayout needs plan_path")
        require(self.merge_every >= 1, "merge_every must be >= 1")
        require(self.max_episodes >= 0, "max_episodes must be >= 0")
        # passed on as **kwargs next to these parameters of EpisodeReader.open and rewrite: an
        # option of the same name would silently set the parameter instead
        clash = sorted(set(self.storage_options) & _RESERVED_OPTIONS)
        require(not clash, f"storage_options may not be named {clash} (parameters of the reader and rewriter)")


_RESERVED_OPTIONS = frozenset(
    {
        "target",
        "check",
        "config",
        "decode_threads",
        "footer_offset",
        "footer_length",
        "min_psnr_db",
        "src",
        "layout",
        "dst",
    }
)


@dataclass
class RelayoutReport:
    day: str
    relaid: int = 0
    reused: int = 0
    skipped: int = 0  # already in the plan's layout
    failed: list[str] = field(default_factory=list)
    pointers_flipped: int = 0
    bytes_old: int = 0
    bytes_new: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "relaid": self.relaid,
            "reused": self.reused,
            "skipped": self.skipped,
            "failed": len(self.failed),
            "errors": self.failed[:20],
            "pointers_flipped": self.pointers_flipped,
            "bytes_old": self.bytes_old,
            "bytes_new": self.bytes_new,
        }


def partition_rows(catalog_uri: str, day: str, storage_options: dict[str, str] | None = None) -> Iterator[dict]:
    dt = DeltaTable(catalog_uri, storage_options=storage_options or None)
    dset = dt.to_pyarrow_dataset(file_pruning_predicate=[("day", "=", day)])
    for batch in dset.to_batches(columns=COLUMNS, filter=ds.field("day") == day, batch_size=1024):
        yield from batch.to_pylist()


def relayout_episode(row: dict, plan: LayoutPlan, cfg: RelayoutConfig, report: RelayoutReport) -> PointerUpdate | None:
    so: dict[str, Any] = cfg.storage_options  # fsspec options, passed on as **storage_options
    src = EpisodeReader.open(row["uri"], row.get("footer_offset"), row.get("footer_length"), **so)
    try:
        layout = plan.layout_for(src.meta)
        if src.layout_version == layout.version:
            report.skipped += 1
            return None
        dst = sibling_uri(row["uri"], row["episode_id"], layout.version)
        fs, path = fsspec.core.url_to_fs(dst, **so)
        result = None
        if fs.exists(path):  # an earlier, interrupted run got this far: reuse only if it verifies
            try:
                old = EpisodeReader.open(dst, **so)
                try:
                    if old.layout_version == layout.version:
                        verify(src, old, min_psnr_db=cfg.min_psnr_db)
                        result = (old.source.size(), old.footer_offset, old.footer_length)
                        report.reused += 1
                finally:
                    old.close()
            except ContainerError:
                result = None
        if result is None:
            res = rewrite(src, layout, dst, cfg.min_psnr_db, **so)
            result = (res.size_bytes, res.footer_offset, res.footer_length)
            report.relaid += 1
        report.bytes_old += src.source.size()
        report.bytes_new += int(result[0])
        return PointerUpdate(row["episode_id"], row["day"], row["uri"], dst, layout.version, *map(int, result))
    finally:
        src.close()


def relayout_partition(day: str, cfg: RelayoutConfig, log=lambda s: None, progress=lambda n: None) -> RelayoutReport:
    plan = LayoutPlan.load(cfg.plan_path)
    report = RelayoutReport(day)
    pending: list[PointerUpdate] = []
    seen = 0
    for row in partition_rows(cfg.catalog_uri, day, cfg.storage_options):
        if cfg.max_episodes and seen >= cfg.max_episodes:
            break
        seen += 1
        progress(1)
        if row.get("layout_version") == plan.version:
            report.skipped += 1
            continue
        try:
            upd = relayout_episode(row, plan, cfg, report)
        except (RobodataError, OSError, ValueError) as exc:
            report.failed.append(f"{row.get('episode_id')}: {exc}")
            log(f"relayout failed for {row.get('episode_id')}: {exc}")
            continue
        if upd is not None:
            pending.append(upd)
        if len(pending) >= cfg.merge_every:
            report.pointers_flipped += flip_pointers(cfg.catalog_uri, pending, cfg.storage_options)
            pending = []
    report.pointers_flipped += flip_pointers(cfg.catalog_uri, pending, cfg.storage_options)
    return report


__all__ = ["RelayoutConfig", "RelayoutReport", "relayout_partition", "relayout_episode", "partition_rows"]
