"""Leftovers of killed processes count against the budget and are settled on open.

Processes are SIGKILLed (for real) at the worst points: after some page files of a fetch are in
place but before the index knows them, and after an eviction was committed but before its files
were unlinked. The next process to open the cache must find every page file on disk accounted
for and within the budget, without anyone running `cache-reconcile`, and without scanning."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal

import numpy as np
import pytest

from robodata.cache import PageCache, PageCacheConfig
from robodata.cache.store import PageStore

PS = 4096
OBJ_PAGES = 48


def _objects(tmp_path, n=3):
    out = {}
    for i in range(n):
        data = np.random.default_rng(i).integers(0, 256, OBJ_PAGES * PS, dtype=np.uint8).tobytes()
        p = tmp_path / f"o{i}.bin"
        p.write_bytes(data)
        out[str(p)] = data
    return out


def _config(tmp_path, pages):
    return PageCacheConfig(root=str(tmp_path / "cache"), page_size=PS, budget_bytes=pages * PS, touch_flush_s=0)


def _killed_reader(cfg, uri, offset, length, kill_on: str, after: int) -> None:
    """Read through the cache; SIGKILL this process at the `after`-th call of PageStore.<kill_on>."""
    calls = [0]
    real = getattr(PageStore, kill_on)

    def hooked(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, *args, **kwargs)

    setattr(PageStore, kill_on, hooked)
    PageCache(cfg).read(uri, offset, length)
    os._exit(0)  # the kill point was never reached


def _run_killed(cfg, uri, offset, length, kill_on, after):
    p = mp.get_context("fork").Process(target=_killed_reader, args=(cfg, uri, offset, length, kill_on, after))
    p.start()
    p.join(60)
    return p.exitcode


def _disk(cache: PageCache) -> tuple[dict[tuple[str, int], int], int]:
    """Page files on disk -> payload bytes, and the number of temp files."""
    pages, tmps = {}, 0
    for oid, page, path in cache.store.scan():
        if oid is None or page is None:
            tmps += 1
        else:
            pages[(oid, page)] = path.stat().st_size - 16
    return pages, tmps


def _assert_accounted(cache: PageCache, budget: int) -> None:
    on_disk, tmps = _disk(cache)
    rows = {(o, p): n for o, p, n in cache._proc().rows()}
    assert tmps == 0, "temp files of killed processes are removed on open"
    assert set(on_disk) == set(rows), f"{len(set(on_disk) - set(rows))} page files no row counts"
    assert sum(on_disk.values()) == cache.stats().resident_bytes <= budget


def test_killed_mid_fetch_and_mid_eviction_leave_only_counted_files(tmp_path):
    objs = _objects(tmp_path)
    uris = list(objs)
    budget = 40 * PS
    cfg = _config(tmp_path, 40)
    PageCache(cfg).close()
    rng = np.random.default_rng(7)
    kills = 0
    for round_ in range(12):
        uri = uris[round_ % len(uris)]
        first = int(rng.integers(0, OBJ_PAGES - 30))
        # a 30-page read: killed after 1..29 of its page files were written, or at its first unlink
        kill_on, after = ("put", int(rng.integers(1, 30))) if round_ % 3 else ("remove", 0)
        code = _run_killed(cfg, uri, first * PS, 30 * PS, kill_on, after)
        kills += code == -signal.SIGKILL
        cache = PageCache(cfg)  # opening settles what the killed process left: no reconcile
        _assert_accounted(cache, budget)
        cache.close()
    assert kills >= 10, f"only {kills} kills landed"
    cache = PageCache(cfg)
    for uri, data in objs.items():  # and the cache still serves the right bytes
        assert cache.read(uri, 0, len(data)) == data
    _assert_accounted(cache, budget)


def test_opening_settles_dead_owners_without_scanning_the_cache(tmp_path, monkeypatch):
    objs = _objects(tmp_path, 1)
    (uri,) = objs
    cfg = _config(tmp_path, 200)
    cache = PageCache(cfg)
    cache.read(uri, 0, 10 * PS)  # resident pages from a process that exits cleanly
    cache.close()
    assert _run_killed(cfg, uri, 20 * PS, 20 * PS, "put", 7) == -signal.SIGKILL  # 7 of 20 written

    def no_scan(self):
        raise AssertionError("opening a cache must not scan its page files")

    monkeypatch.setattr(PageStore, "scan", no_scan)
    cache = PageCache(cfg)
    assert cache.settled == {"dead_owners": 1, "adopted_pages": 7, "dropped_reservations": 13, "unlinked_doomed": 0}
    assert cache.stats().resident_bytes == 17 * PS
    assert not [n for n in os.listdir(tmp_path / "cache" / "owners") if n != cache.owner]
    monkeypatch.undo()
    _assert_accounted(cache, cfg.budget_bytes)


def test_a_page_file_without_a_row_is_counted_once_it_is_served(tmp_path):
    """A cache written by an older version can hold page files no row counts: a hit adopts them."""
    objs = _objects(tmp_path, 1)
    (uri,) = objs
    cfg = _config(tmp_path, 8)
    cache = PageCache(cfg)
    cache.read(uri, 0, 8 * PS)
    idx = cache._proc()
    rows = [(o, p) for o, p, _ in idx.rows()]
    idx.drop_rows(rows[:4])  # as if an old process died between writing the files and the index
    assert cache.stats().resident_bytes == 4 * PS
    assert cache.read(uri, 0, 8 * PS) == objs[uri][: 8 * PS]  # hits on all 8
    assert cache.stats().resident_bytes == 8 * PS
    cache.read(uri, 8 * PS, 4 * PS)  # 4 more pages: the budget (8) holds, evicting adopted ones too
    _assert_accounted(cache, cfg.budget_bytes)


@pytest.mark.parametrize("pages", [3])
def test_a_read_larger_than_the_budget_is_served_but_not_all_stored(tmp_path, pages):
    objs = _objects(tmp_path, 1)
    (uri,) = objs
    cfg = _config(tmp_path, pages)
    cache = PageCache(cfg)
    assert cache.read(uri, 0, 10 * PS) == objs[uri][: 10 * PS]
    _assert_accounted(cache, cfg.budget_bytes)
    assert cache.stats().resident_bytes == pages * PS
