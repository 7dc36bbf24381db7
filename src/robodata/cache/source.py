"""CachedSource: a RangeSource over one object through the page cache, with a fallback to the
object itself when the cache is unusable (read-only or full directory, broken index)."""

from __future__ import annotations

import errno
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Protocol


class PagedCache(Protocol):
    """What a CachedSource asks of its cache (robodata.cache.pagecache.PageCache is one)."""

    root: Path

    def declare(self, uri: str, size: int) -> None: ...
    def object_size(self, uri: str) -> int: ...
    def read(self, uri: str, offset: int, length: int, size: int) -> bytes: ...


class CachedSource:
    """RangeSource over one object through the page cache.

    Fallback: when the cache itself fails (a read-only or full cache directory, a locked or broken
    index: OSError / sqlite3.Error), the source warns once and reads from the object directly;
    errors of the object itself (missing, unreadable) still propagate."""

    def __init__(self, cache: PagedCache, uri: str, size: int | None):
        self.cache = cache
        self.name = uri
        self._direct: Any = None
        if size is not None:
            self._guard(lambda: cache.declare(uri, size))
        self._size = size
        self.range_reads = 0
        self.bytes_read = 0

    def _guard(self, fn: Any) -> Any:
        if self._direct is None:
            try:
                return fn()
            except FileNotFoundError:
                raise
            except (OSError, sqlite3.Error) as exc:
                from robodata.container.source import open_source

                if not self._cache_fault(exc):
                    raise
                warnings.warn(
                    f"page cache {self.cache.root} unusable ({type(exc).__name__}: {exc}); "
                    f"reading {self.name} from its source",
                    stacklevel=3,
                )
                self._direct = open_source(self.name)
        return None

    def _cache_fault(self, exc: OSError | sqlite3.Error) -> bool:
        """Whether `exc` came from the cache directory rather than the object."""
        if isinstance(exc, sqlite3.Error):
            return True
        where = str(getattr(exc, "filename", "") or "")
        return where.startswith(str(self.cache.root)) or isinstance(exc, PermissionError) or exc.errno == errno.ENOSPC

    def size(self) -> int:
        if self._size is None:
            self._size = self._guard(lambda: self.cache.object_size(self.name))
            if self._direct is not None:
                self._size = self._direct.size()
        return int(self._size)

    def read(self, offset: int, length: int) -> bytes:
        size = self.size()
        data = self._guard(lambda: self.cache.read(self.name, offset, length, size))
        if self._direct is not None:
            data = self._direct.read(offset, length)
        self.range_reads += 1
        self.bytes_read += len(data)
        return data
