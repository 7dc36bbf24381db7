"""Issue 24: a page cache that fails (read-only or full directory, locked index) never fails a read:
the source warns once and reads from the object; a cache that cannot be opened is a RobodataError."""

import errno
import sqlite3

import pytest

from robodata.cache import PageCache, PageCacheConfig
from robodata.cache.pagecache import CacheUnusableError


@pytest.mark.parametrize(
    "fault",
    [
        sqlite3.OperationalError("database is locked"),
        OSError(errno.ENOSPC, "No space left on device"),
        PermissionError(errno.EACCES, "Permission denied"),
    ],  # fmt: skip
)
def test_reads_fall_back_to_the_source_when_the_cache_fails(tmp_path, monkeypatch, fault):
    obj = tmp_path / "obj.bin"
    obj.write_bytes(bytes(range(256)) * 64)
    cache = PageCache(PageCacheConfig(root=str(tmp_path / "cache"), page_size=4096, budget_bytes=1 << 20))

    def broken(*a, **k):
        raise fault

    monkeypatch.setattr(cache, "read", broken)
    monkeypatch.setattr(cache, "declare", broken)
    with pytest.warns(UserWarning, match="unusable"):
        src = cache.source(str(obj), size=obj.stat().st_size)
        assert src.read(100, 50) == obj.read_bytes()[100:150]
    assert src.read(5000, 10) == obj.read_bytes()[5000:5010]  # warned once, keeps reading


def test_a_missing_object_is_not_hidden_by_the_fallback(tmp_path):
    cache = PageCache(PageCacheConfig(root=str(tmp_path / "cache"), page_size=4096, budget_bytes=1 << 20))
    with pytest.raises(FileNotFoundError):
        cache.source(str(tmp_path / "gone.bin")).read(0, 10)


def test_a_cache_root_that_is_a_file_is_a_robodata_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CacheUnusableError, match="file"):
        PageCache(PageCacheConfig(root=str(tmp_path / "file"), page_size=4096, budget_bytes=1 << 20))
