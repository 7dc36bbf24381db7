"""Sensor policy (Dagster-free): new landing items -> claimed when whole -> batches -> staggered launches.

State (LaunchState, Stateful) holds the landing cursor, the entries seen but not settled yet
(robodata.ingest.landing.settle) and the batches waiting for their launch time, so it stays small
whatever the number of episodes seen. An entry still settling is listed again on the next ticks
even once the cursor's watermark has passed its completion time (another entry was claimed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.config import require
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.dedup import not_cataloged
from robodata.ingest.landing.scan import LandingCursor, LandingItem, scan
from robodata.ingest.landing.settle import SettleState, claim
from robodata.ingest.landing.stagger import StaggerPolicy, launch_offsets
from robodata.ingest.tables import IngestPaths
from robodata.storage import StorageLocation, objects


@dataclass(frozen=True)
class BatchPolicy:
    max_items: int = 1000
    max_bytes: int = 64 * 2**30
    settle_s: float = 2.0  # an entry is claimed once unchanged over two ticks this far apart (0: on sight)
    list_limit: int = 100_000
    incomplete_after_s: float = 900.0  # settled this long without its format's end: claimed as it is

    def __post_init__(self) -> None:
        require(self.max_items >= 1 and self.max_bytes >= 1, "batch limits must be >= 1")
        require(
            self.settle_s >= 0 and self.incomplete_after_s >= self.settle_s, "need 0 <= settle_s <= incomplete_after_s"
        )


def cut_batches(items: list[LandingItem], policy: BatchPolicy) -> list[list[LandingItem]]:
    """Consecutive (completion-ordered) groups within max_items / max_bytes."""
    out: list[list[LandingItem]] = []
    cur: list[LandingItem] = []
    size = 0
    for it in items:
        if cur and (len(cur) >= policy.max_items or size + it.size_bytes > policy.max_bytes):
            out.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += it.size_bytes
    if cur:
        out.append(cur)
    return out


@dataclass
class LaunchState:
    landing: LandingCursor = field(default_factory=LandingCursor)
    pending: list[tuple[str, float]] = field(default_factory=list)  # (batch, due unix time)
    seq: int = 0
    settling: SettleState = field(default_factory=SettleState)

    def state_dict(self) -> dict[str, Any]:
        return {
            "landing": self.landing.state_dict(),
            "pending": [list(p) for p in self.pending],
            "seq": self.seq,
            "settling": self.settling.state_dict(),
        }

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.landing.load_state_dict(d.get("landing", {}))
        self.pending = [(str(b), float(t)) for b, t in d.get("pending", [])]
        self.seq = int(d.get("seq", 0))
        self.settling.load_state_dict(d.get("settling", {}))


@dataclass
class Tick:
    new_batches: list[str]
    launch: list[str]
    items: int
    already_cataloged: int = 0  # listed items whose content the catalog holds: not ingested again
    settling: int = 0  # entries seen and not whole yet (still being written, or waiting for their end)


def tick(
    state: LaunchState,
    landing_url: str,
    paths: IngestPaths,
    batches: BatchPolicy,
    stagger: StaggerPolicy,
    now: float | None = None,
    storage_options: dict | None = None,
) -> Tick:
    """List, cut new batches (manifests written), schedule them staggered, return the due ones."""
    now = time.time() if now is None else now
    if storage_options is None and objects.is_remote(landing_url):  # as scan does: the AWS_* variables
        storage_options = StorageLocation.from_env(landing_url).fsspec_options()
    listed = _listed(landing_url, state, batches.list_limit, storage_options)
    items = claim(listed, state.settling, now, batches.settle_s, batches.incomplete_after_s, storage_options)
    # identity by content: an item the catalog already holds (e.g. after `make demo`, or a cursor
    # lost) is passed over; the cursor still moves past it. Reads each new item's bytes once.
    catalog = Catalog(CatalogConfig(uri=paths.catalog, storage_options=paths.delta_options()))
    dedup = not_cataloged(items, catalog, storage_options)
    fresh = [replace(it, digest=dedup.digests.get(it.uri, "")) for it in dedup.fresh]  # handed on, not re-read
    groups = cut_batches(fresh, batches)
    stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y%m%dT%H%M%S")
    names = []
    for g in groups:
        state.seq += 1
        name = f"{stamp}-{state.seq:06d}"
        write_manifest(paths, name, g)
        names.append(name)
    state.landing.advance(items)
    base = max([now] + [t for _, t in state.pending])  # new launches queue behind pending ones
    offs = launch_offsets(
        len(names), StaggerPolicy(stagger.max_concurrent, stagger.run_s, stagger.jitter, stagger.seed + state.seq)
    )
    state.pending += [(n, base + o if state.pending else now + o) for n, o in zip(names, offs, strict=True)]
    due = [b for b, t in state.pending if t <= now]
    state.pending = [(b, t) for b, t in state.pending if t > now]
    return Tick(names, due, len(items), len(dedup.known), len(state.settling.seen))


def _listed(url: str, state: LaunchState, limit: int, storage_options: dict | None) -> list[LandingItem]:
    """New entries and those still settling, in completion order (at most `limit`, never splitting
    one completion instant: the rest come on the next tick)."""
    oldest = state.settling.oldest()
    since = state.landing.watermark if oldest is None else min(oldest, state.landing.watermark)
    waiting = state.settling.seen
    found = [
        it for it in scan(url, storage_options, completed_since=since) if state.landing.is_new(it) or it.name in waiting
    ]
    found.sort(key=lambda it: (it.completed_at, it.name))
    if len(found) > limit:
        cut = found[limit - 1].completed_at
        found = [it for it in found if it.completed_at < cut] or [it for it in found if it.completed_at == cut]
    return found
