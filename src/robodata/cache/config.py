"""Typed configuration of the node page cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robodata.config import require

MiB = 1 << 20


@dataclass(frozen=True)
class PageCacheConfig:
    """A page cache on one node's local disk.

    root          directory holding the index (index.sqlite) and the page files
    budget_bytes  resident page bytes never exceed this after a read completes
    page_size     bytes per page; objects are fetched and evicted in whole pages
    verify        check each page's length and CRC-32 on every hit (a torn or bit-rotted
                  page becomes a miss instead of bad data)
    touch_flush_s how often a process writes its batched LRU touches and counters to the index
    lock_stripes  number of single-flight lock files (concurrent misses on one page fetch it once)
    storage_options passed to fsspec for remote origins (e.g. S3 endpoint, credentials)
    """

    root: str
    budget_bytes: int = 64 * 1024 * MiB
    page_size: int = MiB
    verify: bool = True
    touch_flush_s: float = 1.0
    lock_stripes: int = 256
    busy_timeout_s: float = 60.0
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(bool(self.root), "page cache root must be set")
        require(4096 <= self.page_size <= 256 * MiB, f"page_size must be in [4 KiB, 256 MiB], got {self.page_size}")
        require(
            self.budget_bytes >= self.page_size,
            f"budget_bytes ({self.budget_bytes}) must hold at least one page ({self.page_size})",
        )
        require(self.touch_flush_s >= 0, "touch_flush_s must be >= 0")
        require(1 <= self.lock_stripes <= 65536, "lock_stripes must be in [1, 65536]")
        require(self.busy_timeout_s > 0, "busy_timeout_s must be > 0")
