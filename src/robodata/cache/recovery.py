"""Leftovers of processes that died while using a page cache.

`settle_dead` runs whenever a process opens the cache. A dead owner (see owners.py) can only
have left rows under its own id (index.py): reservations of pages it was fetching (counted
against the budget since before their files were written) and evicted pages it had not
unlinked yet. With the stripe locks of those pages held (no live process is filling them), each
reserved page whose file is whole in place becomes a resident page; the others are uncounted
and their temp files removed; doomed files no row claims are unlinked.
Cost: one indexed query for the owners with rows, one flock per owner file, and work
proportional to the dead owners' rows (pages they had in flight or were evicting): never a scan
of the cache, so a node cache with millions of pages opens as fast as an empty one.

`reconcile` (`robodata cache-reconcile`) is the full scan, for caches written by older versions
or damaged by hand: it settles dead owners, then removes files no row accounts for and rows
whose file is gone, and recounts resident bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from robodata.cache.index import Key, PageIndex
from robodata.cache.owners import dead, pid_alive
from robodata.cache.store import PageStore


@dataclass(frozen=True)
class CacheSite:
    """What recovery needs of one process's open page cache (PageCache.recovery_site), and nothing more."""

    root: Path
    store: PageStore
    index: PageIndex  # this process's
    owner_id: str  # this process's owner id (never settled as dead)
    hold: Callable[[list[Key]], AbstractContextManager[None]]  # the pages' single-flight locks


def settle_dead(cache: CacheSite) -> dict[str, int]:
    idx, store = cache.index, cache.store
    out = {"dead_owners": 0, "adopted_pages": 0, "dropped_reservations": 0, "unlinked_doomed": 0}
    with_rows = idx.owners()  # before the owner files are listed: see owners.dead
    with dead(cache.root, cache.owner_id, with_rows) as owners:
        for owner in owners:
            out["dead_owners"] += 1
            inflight, doomed = idx.owner_rows(owner)
            if not inflight and not doomed:
                continue
            with cache.hold([(o, p) for o, p, _ in inflight] + doomed):
                keep = {(o, p) for o, p, size in inflight if store.whole(o, p, size)}
                for o, p, _ in inflight:
                    store.remove_tmp(o, p, owner)
                unlink = idx.settle(owner, keep)
                for o, p in unlink:
                    store.remove(o, p)
            out["adopted_pages"] += len(keep)
            out["dropped_reservations"] += len(inflight) - len(keep)
            out["unlinked_doomed"] += len(unlink)
    return out


def reconcile(cache: CacheSite, grace_s: float) -> dict[str, int]:
    """Full repair; safe while others run: files younger than `grace_s` are left alone."""
    idx = cache.index
    settled = settle_dead(cache)
    claimed = idx.claimed()
    pages = {(o, p) for o, p, _ in idx.rows()}
    seen: set[tuple[str, int]] = set()
    removed_tmp = removed_orphans = 0
    young = time.time() - grace_s
    for oid, page, path in cache.store.scan():
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            continue
        if oid is None or page is None:
            if mtime < young or not _pid_alive(path.name):
                path.unlink(missing_ok=True)
                removed_tmp += 1
            continue
        seen.add((oid, page))
        if (oid, page) not in claimed and mtime < young:
            path.unlink(missing_ok=True)
            removed_orphans += 1
    dangling = sorted(pages - seen)
    idx.drop_rows(dangling)
    idx.recount()
    return {
        "temp_files": removed_tmp,
        "orphan_pages": removed_orphans,
        "dangling_rows": len(dangling),
        "dead_owners": settled["dead_owners"],
    }


def _pid_alive(tmp_name: str) -> bool:
    # temp names are ".<page file>.<pid>.<token>.tmp"
    try:
        pid = int(tmp_name.split(".")[-3])
    except (ValueError, IndexError):
        return False
    return pid_alive(pid)
