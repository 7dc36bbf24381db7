"""PageCache: a read-through, page-granular disk cache of remote objects on one node.

Objects (container files on S3 or any fsspec filesystem, or local paths) are split into
fixed-size pages. A read fetches only the pages it misses, with one range request per
run of consecutive missing pages, stores each page as its own file and evicts least
recently used pages (never whole files) to stay under the byte budget.

Many processes share one cache directory: dataloader workers of several training runs
on a node. Hits are lock-free (a page file exists or it does not); misses on the same
page are single-flight across processes (striped flock files), and the index is a WAL
SQLite database (see index.py for why and for the crash-safety argument).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import multiprocessing.util
import os
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robodata.cache.config import PageCacheConfig
from robodata.cache.index import PageIndex
from robodata.cache.store import PageStore
from robodata.errors import RobodataError


@dataclass
class CacheStats:
    hits: int = 0  # pages served from local disk
    misses: int = 0  # pages fetched from the origin
    bytes_fetched: int = 0  # bytes read from the origin
    evictions: int = 0
    resident_bytes: int = 0  # page bytes on disk now (shared across processes)


def object_id(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:32]


class PageCache:
    def __init__(self, config: PageCacheConfig):
        self.config = config
        self.root = Path(config.root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "locks").mkdir(exist_ok=True)
        self.store = PageStore(self.root, config.verify)
        self._reset()
        self._proc()  # open the index now: a bad root or page size fails here, not in a worker

    # ------------------------------------------------------------ per-process state
    def _reset(self) -> None:
        self._pid = -1
        self._index: PageIndex | None = None
        self._fs: dict[str, Any] = {}
        self._lock_fds: dict[int, int] = {}
        self._thread_locks: dict[int, threading.Lock] = {}
        self._mutex = threading.Lock()
        self._pending_touch: set[tuple[str, int]] = set()
        self._pending: dict[str, int] = {}
        self._last_flush = time.monotonic()
        self.local = CacheStats()  # this process's own counters

    def _proc(self) -> PageIndex:
        # SQLite connections, fsspec clients and lock fds must not cross fork(): reopen per process.
        if self._pid != os.getpid():
            self._reset()
            self._pid = os.getpid()
            self._index = PageIndex(self.root / "index.sqlite", self.config.page_size, self.config.busy_timeout_s)
            # Flush batched counters/touches when a process exits normally (multiprocessing
            # children, e.g. dataloader workers, skip atexit but run these finalizers).
            multiprocessing.util.Finalize(self, PageCache._exit_flush, args=(weakref.ref(self),), exitpriority=10)
        assert self._index is not None
        return self._index

    @staticmethod
    def _exit_flush(ref) -> None:
        cache = ref()
        if cache is not None and cache._pid == os.getpid():
            with contextlib.suppress(Exception):  # best effort at exit
                cache.flush()

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    # ------------------------------------------------------------ public API
    def source(self, uri: str, size: int | None = None) -> CachedSource:
        """A RangeSource for `uri` that reads through this cache (`size` skips a HEAD/stat)."""
        return CachedSource(self, str(uri), size)

    def object_size(self, uri: str) -> int:
        oid = object_id(uri)
        idx = self._proc()
        size = idx.object_size(oid)
        if size is None:
            size = int(self._origin(uri).size(self._strip(uri)))
            self._unlink(idx.set_object(oid, uri, size))
        return size

    def declare(self, uri: str, size: int) -> None:
        """Record a known object size (from a manifest); a changed size drops stale pages."""
        oid = object_id(uri)
        idx = self._proc()
        if idx.object_size(oid) != size:
            self._unlink(idx.set_object(oid, uri, size))

    def read(self, uri: str, offset: int, length: int, size: int | None = None) -> bytes:
        size = self.object_size(uri) if size is None else size
        if offset < 0 or length < 0:
            raise ValueError(f"bad range {offset}+{length} of {uri}")
        end = min(offset + length, size)
        if end <= offset:
            return b""
        ps = self.config.page_size
        oid = object_id(uri)
        first, last = offset // ps, (end - 1) // ps
        pages: dict[int, bytes] = {}
        for p in range(first, last + 1):
            data = self.store.get(oid, p, self._page_len(p, size))
            if data is not None:
                pages[p] = data
        missing = [p for p in range(first, last + 1) if p not in pages]
        hits = len(pages)
        if missing:
            pages.update(self._fill(uri, oid, size, missing))
        with self._mutex:
            self.local.hits += hits
            self._pending["hits"] = self._pending.get("hits", 0) + hits
            self._pending_touch.update((oid, p) for p in range(first, last + 1) if p not in missing)
        self._maybe_flush()
        buf = b"".join(pages[p] for p in range(first, last + 1))
        lo = offset - first * ps
        return buf[lo : lo + (end - offset)]

    def stats(self) -> CacheStats:
        """Node-wide counters (all processes), after flushing this process's pending ones."""
        self.flush()
        c = self._proc().counters()
        return CacheStats(c["hits"], c["misses"], c["bytes_fetched"], c["evictions"], c["resident_bytes"])

    def flush(self) -> None:
        idx = self._proc()
        with self._mutex:
            touch, pending = self._pending_touch, self._pending
            self._pending_touch, self._pending = set(), {}
            self._last_flush = time.monotonic()
        if touch or pending:
            idx.touch(sorted(touch), pending)

    def reconcile(self, grace_s: float = 60.0) -> dict[str, int]:
        """Repair after crashes: delete temp leftovers and page files without an index row,
        drop rows whose file is gone, recount resident bytes. Safe while others run:
        files younger than `grace_s` are left alone (their row may be about to be written)."""
        idx = self._proc()
        rows = {(o, p) for o, p, _ in idx.rows()}
        seen: set[tuple[str, int]] = set()
        removed_tmp = removed_orphans = 0
        young = time.time() - grace_s
        for oid, page, path in self.store.scan():
            try:
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                continue
            if oid is None:
                if mtime < young or not _pid_alive(path.name):
                    path.unlink(missing_ok=True)
                    removed_tmp += 1
                continue
            seen.add((oid, page))
            if (oid, page) not in rows and mtime < young:
                path.unlink(missing_ok=True)
                removed_orphans += 1
        dangling = sorted(rows - seen)
        idx.drop_rows(dangling)
        idx.recount()
        return {"temp_files": removed_tmp, "orphan_pages": removed_orphans, "dangling_rows": len(dangling)}

    def close(self) -> None:
        if self._pid == os.getpid() and self._index is not None:
            self.flush()
            self._index.close()
            for fd in self._lock_fds.values():
                os.close(fd)
        self._reset()

    # ------------------------------------------------------------ internals
    def _page_len(self, page: int, size: int) -> int:
        ps = self.config.page_size
        return min(ps, size - page * ps)

    def _fill(self, uri: str, oid: str, size: int, missing: list[int]) -> dict[int, bytes]:
        """Fetch missing pages once node-wide: lock their stripes (sorted: no deadlock),
        re-check the disk, fetch runs of still-missing pages, write, index."""
        stripes = sorted({(int(oid[:8], 16) + p) % self.config.lock_stripes for p in missing})  # same in every process
        got: dict[int, bytes] = {}
        held = []
        try:
            for s in stripes:
                held.append(self._lock(s))
            todo = []
            for p in missing:
                data = self.store.get(oid, p, self._page_len(p, size))
                if data is None:
                    todo.append(p)
                else:
                    got[p] = data
            fetched = 0
            for run in _runs(todo):
                ps = self.config.page_size
                start, stop = run[0] * ps, min(size, (run[-1] + 1) * ps)
                data = self._fetch(uri, start, stop)
                fetched += len(data)
                for p in run:
                    got[p] = data[(p - run[0]) * ps : (p - run[0]) * ps + self._page_len(p, size)]
                    self.store.put(oid, p, got[p])
            if todo:
                with self._mutex:
                    counters = {"misses": len(todo), "bytes_fetched": fetched, **self._pending}
                    self._pending = {}
                    self.local.misses += len(todo)
                    self.local.bytes_fetched += fetched
                victims = self._proc().add_pages(
                    [(oid, p, len(got[p])) for p in todo], self.config.budget_bytes, counters
                )
                self.local.evictions += len(victims)
                self._unlink(victims)
            with self._mutex:  # served by another process's fetch: a hit for us
                self.local.hits += len(missing) - len(todo)
                self._pending["hits"] = self._pending.get("hits", 0) + len(missing) - len(todo)
        finally:
            for s in reversed(held):
                self._unlock(s)
        return got

    def _fetch(self, uri: str, start: int, stop: int) -> bytes:
        try:
            data = self._origin(uri).cat_file(self._strip(uri), start=start, end=stop)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise RobodataError(
                f"page cache: reading {uri} bytes {start}-{stop} from the origin failed: {exc}"
            ) from exc
        if len(data) != stop - start:
            raise RobodataError(
                f"page cache: origin returned {len(data)} of {stop - start} bytes for {uri} "
                f"at {start} (object changed or truncated?)"
            )
        return data

    def _unlink(self, keys: list[tuple[str, int]]) -> None:
        for oid, p in keys:
            self.store.remove(oid, p)

    def _origin(self, uri: str):
        import fsspec

        protocol, _ = fsspec.core.split_protocol(uri)
        protocol = protocol or "file"
        fs = self._fs.get(protocol)
        if fs is None:
            opts = self.config.storage_options if protocol != "file" else {}
            fs = self._fs[protocol] = fsspec.filesystem(protocol, **opts)
        return fs

    @staticmethod
    def _strip(uri: str) -> str:
        import fsspec

        protocol, path = fsspec.core.split_protocol(uri)
        return path if protocol not in (None, "file") else os.path.abspath(path)

    def _lock(self, stripe: int) -> int:
        tl = self._thread_locks.setdefault(stripe, threading.Lock())
        tl.acquire()
        fd = self._lock_fds.get(stripe)
        if fd is None:
            fd = self._lock_fds[stripe] = os.open(self.root / "locks" / f"{stripe}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
        return stripe

    def _unlock(self, stripe: int) -> None:
        fcntl.flock(self._lock_fds[stripe], fcntl.LOCK_UN)
        self._thread_locks[stripe].release()

    def _maybe_flush(self) -> None:
        if len(self._pending_touch) >= 1024 or time.monotonic() - self._last_flush >= self.config.touch_flush_s:
            self.flush()


class CachedSource:
    """RangeSource over one object through the page cache."""

    def __init__(self, cache: PageCache, uri: str, size: int | None):
        self.cache = cache
        self.name = uri
        if size is not None:
            cache.declare(uri, size)
        self._size = size
        self.range_reads = 0
        self.bytes_read = 0

    def size(self) -> int:
        if self._size is None:
            self._size = self.cache.object_size(self.name)
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        data = self.cache.read(self.name, offset, length, self.size())
        self.range_reads += 1
        self.bytes_read += len(data)
        return data


def _runs(pages: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for p in sorted(pages):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _pid_alive(tmp_name: str) -> bool:
    # temp names are ".<page file>.<pid>.<rand>.tmp"
    try:
        pid = int(tmp_name.split(".")[-3])
    except (ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
