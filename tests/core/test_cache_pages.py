"""Page cache: read-through correctness, page-granular LRU eviction, counters, integrity, S3."""

from __future__ import annotations

import os

import numpy as np
import pytest

from robodata.cache import PageCache, PageCacheConfig
from robodata.cache.pagecache import object_id
from robodata.errors import ConfigError

PS = 4096


def _origin(tmp_path, n_bytes: int, name: str = "obj.bin", seed: int = 0):
    data = np.random.default_rng(seed).integers(0, 256, n_bytes, dtype=np.uint8).tobytes()
    p = tmp_path / name
    p.write_bytes(data)
    return str(p), data


def _cache(tmp_path, pages: int, **kw) -> PageCache:
    return PageCache(
        PageCacheConfig(root=str(tmp_path / "cache"), page_size=PS, budget_bytes=pages * PS, touch_flush_s=0, **kw)
    )


def test_reads_match_origin_and_second_read_is_all_hits(tmp_path):
    uri, data = _origin(tmp_path, 10 * PS + 123)
    cache = _cache(tmp_path, 100)
    rng = np.random.default_rng(1)
    for _ in range(50):
        off = int(rng.integers(0, len(data)))
        n = int(rng.integers(0, 3 * PS))
        assert cache.read(uri, off, n) == data[off : off + n]
    assert cache.read(uri, len(data) - 5, 100) == data[-5:]  # clipped at the end
    assert cache.read(uri, len(data) + 10, 5) == b""
    s = cache.stats()
    assert s.misses == 11 and s.bytes_fetched == len(data)  # every page fetched exactly once
    assert s.resident_bytes == len(data)
    before = s.hits
    src = cache.source(uri)
    assert src.size() == len(data) and src.read(0, len(data)) == data
    s2 = cache.stats()
    assert s2.misses == 11 and s2.hits == before + 11


def test_only_missing_pages_are_fetched_with_one_request_per_run(tmp_path):
    uri, data = _origin(tmp_path, 8 * PS)
    cache = _cache(tmp_path, 100)
    cache.read(uri, 2 * PS, PS)  # page 2
    calls = []
    fs = cache._origin(uri)
    real = fs.cat_file

    def counted(path, start, end):
        calls.append((start, end))
        return real(path, start=start, end=end)

    fs.cat_file = counted
    assert cache.read(uri, 0, 5 * PS) == data[: 5 * PS]
    assert calls == [(0, 2 * PS), (3 * PS, 5 * PS)]


def test_eviction_is_per_page_lru_and_respects_the_budget(tmp_path):
    uri, data = _origin(tmp_path, 10 * PS)
    cache = _cache(tmp_path, 4)
    for p in range(4):
        cache.read(uri, p * PS, 1)
    cache.read(uri, 0, 1)  # page 0 becomes most recently used
    cache.flush()
    cache.read(uri, 4 * PS, 1)  # evicts page 1 (least recently used), not page 0 or the whole file
    oid = object_id(uri)
    on_disk = sorted(int(f.rsplit(".", 1)[1]) for f in os.listdir(cache.store.path(oid, 0).parent) if f.startswith(oid))
    assert on_disk == [0, 2, 3, 4]
    s = cache.stats()
    assert s.evictions == 1 and s.resident_bytes == 4 * PS
    for p in range(10):
        assert cache.read(uri, p * PS, PS) == data[p * PS : (p + 1) * PS]
    assert cache.stats().resident_bytes <= 4 * PS


def test_a_corrupted_page_file_is_refetched_not_served(tmp_path):
    uri, data = _origin(tmp_path, 3 * PS)
    cache = _cache(tmp_path, 10)
    cache.read(uri, 0, 3 * PS)
    path = cache.store.path(object_id(uri), 1)
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert cache.read(uri, PS, PS) == data[PS : 2 * PS]
    assert cache.stats().misses == 4


def test_a_changed_object_size_drops_stale_pages(tmp_path):
    uri, data = _origin(tmp_path, 2 * PS)
    cache = _cache(tmp_path, 10)
    assert cache.source(uri, size=len(data)).read(0, 10) == data[:10]
    new = bytes(reversed(data)) + b"xyz"
    (tmp_path / "obj.bin").write_bytes(new)
    assert cache.source(uri, size=len(new)).read(0, 10) == new[:10]


def test_bad_config_fails_up_front(tmp_path):
    with pytest.raises(ConfigError, match="at least one page"):
        PageCacheConfig(root=str(tmp_path), page_size=PS, budget_bytes=PS - 1)
    _cache(tmp_path, 4)
    with pytest.raises(ConfigError, match="page_size"):
        PageCache(PageCacheConfig(root=str(tmp_path / "cache"), page_size=2 * PS, budget_bytes=8 * PS))


def test_missing_origin_object_is_a_clear_error(tmp_path):
    cache = _cache(tmp_path, 4)
    with pytest.raises(FileNotFoundError):
        cache.source(str(tmp_path / "nope.bin")).read(0, 10)


def test_episode_reader_reads_through_the_cache(tmp_path):
    from robodata.container import EpisodeReader
    from tests.core.helpers_container import write_small

    path = tmp_path / "ep.rdep"
    write_small(path, duration_s=2.0)
    cache = _cache(tmp_path, 1000)
    direct = EpisodeReader.open(str(path)).read_window(0.5, 1.2, ["cam_left", "joint_pos"])
    via = EpisodeReader.open(cache.source(str(path))).read_window(0.5, 1.2, ["cam_left", "joint_pos"])
    for k in direct:
        np.testing.assert_array_equal(direct[k].data, via[k].data)
    misses = cache.stats().misses
    EpisodeReader.open(cache.source(str(path))).read_window(0.5, 1.2, ["cam_left", "joint_pos"])
    assert cache.stats().misses == misses  # warm: nothing fetched again


def test_s3_origin_through_moto(tmp_path):
    boto3 = pytest.importorskip("boto3")
    from tests.core.s3_server import moto_s3

    with moto_s3() as srv:
        s3 = boto3.client(
            "s3",
            endpoint_url=srv["endpoint_url"],
            aws_access_key_id=srv["key"],
            aws_secret_access_key=srv["secret"],
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket="eps")
        data = np.random.default_rng(5).integers(0, 256, 5 * PS + 7, dtype=np.uint8).tobytes()
        s3.put_object(Bucket="eps", Key="a/ep.bin", Body=data)
        cache = PageCache(
            PageCacheConfig(
                root=str(tmp_path / "c"),
                page_size=PS,
                budget_bytes=100 * PS,
                touch_flush_s=0,
                storage_options=srv["storage_options"],
            )
        )
        src = cache.source("s3://eps/a/ep.bin")
        assert src.size() == len(data)
        assert src.read(PS - 3, 2 * PS) == data[PS - 3 : 3 * PS - 3]
        assert cache.stats().bytes_fetched == 3 * PS  # pages 0..2, one range request
        assert src.read(PS, PS) == data[PS : 2 * PS]
        assert cache.stats().bytes_fetched == 3 * PS  # all hits
        assert src.read(0, len(data)) == data


def test_cli_stats_and_reconcile(tmp_path):
    import json

    from typer.testing import CliRunner

    from robodata.cli import app

    uri, data = _origin(tmp_path, 3 * PS)
    cache = _cache(tmp_path, 10)
    cache.read(uri, 0, len(data))
    cache.close()
    (cache.store.path(object_id(uri), 0).parent / f".{object_id(uri)}.9.999999999.abcd.tmp").write_bytes(b"x")
    root = str(tmp_path / "cache")
    res = CliRunner().invoke(app, ["cache-stats", root, "--page-size", str(PS)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["resident_bytes"] == len(data)
    res = CliRunner().invoke(app, ["cache-reconcile", root, "--page-size", str(PS), "--grace-s", "0"])
    assert res.exit_code == 0 and json.loads(res.output)["temp_files"] == 1
    res = CliRunner().invoke(app, ["cache-stats", root])  # wrong page size: a clear error, not a new cache
    assert res.exit_code != 0 and "page_size" in str(res.exception)
