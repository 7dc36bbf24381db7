"""Page cache under many processes and SIGKILL: pages always match the origin, the index
stays consistent and within budget, and opening the cache settles what a kill can leave."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np

from robodata.cache import PageCache, PageCacheConfig
from robodata.cache.pagecache import object_id

PS = 4096
N_OBJ = 3
OBJ_BYTES = 64 * PS + 999


def _objects(tmp_path):
    out = {}
    for i in range(N_OBJ):
        data = np.random.default_rng(i).integers(0, 256, OBJ_BYTES, dtype=np.uint8).tobytes()
        p = tmp_path / f"o{i}.bin"
        p.write_bytes(data)
        out[str(p)] = data
    return out


def _config(tmp_path, pages: int) -> PageCacheConfig:
    return PageCacheConfig(root=str(tmp_path / "cache"), page_size=PS, budget_bytes=pages * PS, touch_flush_s=0.05)


def _reader(cfg: PageCacheConfig, uris: list[str], seed: int, seconds: float, out) -> None:
    cache = PageCache(cfg)
    rng = np.random.default_rng(seed)
    bad = 0
    reads = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        uri = uris[int(rng.integers(len(uris)))]
        off = int(rng.integers(0, OBJ_BYTES))
        n = int(rng.integers(1, 6 * PS))
        with open(uri, "rb") as f:
            f.seek(off)
            want = f.read(n)
        bad += cache.read(uri, off, n) != want
        reads += 1
    cache.close()
    if out is not None:
        out.put((bad, reads))


def _verify_disk_against_origin(cache: PageCache, objs: dict[str, bytes]) -> int:
    by_oid = {object_id(u): d for u, d in objs.items()}
    checked = 0
    for oid, page, _path in cache.store.scan():
        if oid is None:
            continue
        data = by_oid[oid]
        expect = data[page * PS : (page + 1) * PS]
        # Every page file that exists is whole and correct: atomic renames, no torn pages.
        assert cache.store.get(oid, page, len(expect)) == expect, f"page {page} of {oid} is wrong"
        checked += 1
    return checked


def test_many_processes_share_one_cache_within_budget(tmp_path):
    objs = _objects(tmp_path)
    cfg = _config(tmp_path, 40)
    PageCache(cfg)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_reader, args=(cfg, list(objs), s, 1.5, q)) for s in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sum(b for b, _ in results) == 0 and sum(r for _, r in results) > 20
    cache = PageCache(cfg)
    s = cache.stats()
    assert s.resident_bytes <= cfg.budget_bytes
    assert s.hits > 0 and s.misses > 0 and s.evictions > 0
    rows = {(o, p): n for o, p, n in cache._proc().rows()}
    assert sum(rows.values()) == s.resident_bytes
    _verify_disk_against_origin(cache, objs)


def test_sigkill_mid_flight_leaves_no_corrupt_page(tmp_path):
    objs = _objects(tmp_path)
    cfg = _config(tmp_path, 48)
    PageCache(cfg)
    ctx = mp.get_context("fork")
    for round_ in range(3):
        procs = [ctx.Process(target=_reader, args=(cfg, list(objs), 100 * round_ + s, 30.0, None)) for s in range(4)]
        for p in procs:
            p.start()
        time.sleep(0.6 + 0.2 * round_)
        for p in procs:
            assert p.pid is not None
            os.kill(p.pid, signal.SIGKILL)  # mid-read, mid-write, mid-transaction: wherever they are
        for p in procs:
            p.join(10)
            assert p.exitcode == -signal.SIGKILL
    cache = PageCache(cfg)  # opening recovers the WAL and settles what the killed processes left
    assert _verify_disk_against_origin(cache, objs) > 0
    # Without any reconcile: every page file on disk is counted, and the budget holds.
    rows = {(o, p): n for o, p, n in cache._proc().rows()}
    files = {(o, p) for o, p, _ in cache.store.scan() if o is not None}
    assert files == set(rows) and not any(o is None for o, _, _ in cache.store.scan())
    assert cache.stats().resident_bytes == sum(rows.values()) <= cfg.budget_bytes
    cache.reconcile(grace_s=0)
    rows = {(o, p): n for o, p, n in cache._proc().rows()}
    files = {(o, p) for o, p, _ in cache.store.scan() if o is not None}
    assert set(rows) == files  # no orphans, no dangling rows
    assert not any(o is None for o, _, _ in cache.store.scan())  # temp files cleaned
    s = cache.stats()
    assert s.resident_bytes == sum(rows.values()) <= cfg.budget_bytes
    # And the cache keeps working correctly afterwards.
    for uri, data in objs.items():
        assert cache.read(uri, 0, OBJ_BYTES) == data
