"""PageCache: a read-through, page-granular disk cache of remote objects on one node.

Objects (container files on S3 or any fsspec filesystem, or local paths) are split into
fixed-size pages. A read fetches only the pages it misses, with one range request per
run of consecutive missing pages, stores each page as its own file and evicts least
recently used pages (never whole files) to stay under the byte budget.

Many processes share one cache directory: dataloader workers of several training runs
on a node. Hits are lock-free (a page file exists or it does not); misses on the same
page are single-flight across processes (striped flock files), and the index is a WAL
SQLite database (see index.py for why and for the crash-safety argument).

Budget after crashes: a page is counted against the budget before its file is written, so a
process killed at any point leaves only counted files (or files it was deleting); the next
process to open the cache settles them (recovery.py), at a cost that does not grow with the
number of cached pages.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import multiprocessing.util
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robodata.cache import recovery
from robodata.cache.config import PageCacheConfig
from robodata.cache.index import Key, PageIndex
from robodata.cache.owners import Owner
from robodata.cache.source import CachedSource
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


class CacheUnusableError(RobodataError):
    """The page cache directory cannot be used (read-only, full, not a directory, broken index)."""


class PageCache:
    def __init__(self, config: PageCacheConfig):
        self.config = config
        self.root = Path(config.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "locks").mkdir(exist_ok=True)
            self.store = PageStore(self.root, config.verify)
            self._reset()
            self._proc()  # open the index now: a bad root or page size fails here, not in a worker
        except (OSError, sqlite3.Error) as exc:
            raise CacheUnusableError(
                f"page cache {self.root}: unusable ({type(exc).__name__}: {exc}); read without a cache"
            ) from None

    # ------------------------------------------------------------ per-process state
    def _reset(self) -> None:
        self._pid = -1
        self._index: PageIndex | None = None
        self._fs: dict[str, Any] = {}
        self._lock_fds: dict[int, int] = {}
        self._thread_locks: dict[int, threading.Lock] = {}
        self._mutex = threading.Lock()
        self._pending_touch: dict[Key, int] = {}  # page -> length, served from disk since the last flush
        self._pending: dict[str, int] = {}
        self._owner: Owner | None = None
        self._unlinked: list[Key] = []  # evicted pages unlinked since the last index transaction
        self.settled: dict[str, int] = {}  # what opening the cache found left by dead processes
        self._last_flush = time.monotonic()
        self.local = CacheStats()  # this process's own counters

    def _proc(self) -> PageIndex:
        # SQLite connections, fsspec clients and lock fds must not cross fork(): reopen per process.
        if self._pid != os.getpid():
            self._reset()
            self._pid = os.getpid()
            self._index = PageIndex(self.root / "index.sqlite", self.config.page_size, self.config.busy_timeout_s)
            self._owner = Owner(self.root)
            # Flush batched counters/touches and unregister when a process exits normally
            # (multiprocessing children, e.g. dataloader workers, skip atexit but run finalizers).
            multiprocessing.util.Finalize(self, PageCache._exit_flush, args=(weakref.ref(self),), exitpriority=10)
            self.settled = recovery.settle_dead(self._site(self._index))  # leftovers of killed processes
        assert self._index is not None
        return self._index

    def recovery_site(self) -> recovery.CacheSite:
        """This process's view of the cache for recovery.py (opened if needed)."""
        return self._site(self._proc())

    def _site(self, index: PageIndex) -> recovery.CacheSite:
        assert self._owner is not None
        return recovery.CacheSite(self.root, self.store, index, self._owner.id, self._stripes)

    @property
    def owner(self) -> str:
        self._proc()
        assert self._owner is not None
        return self._owner.id

    @staticmethod
    def _exit_flush(ref) -> None:
        cache = ref()
        if cache is not None and cache._pid == os.getpid():
            with contextlib.suppress(Exception):  # best effort at exit
                cache._retire()

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
            self._unlink_victims(idx.set_object(oid, uri, size, self.owner))
        return size

    def declare(self, uri: str, size: int) -> None:
        """Record a known object size (from a manifest); a changed size drops stale pages."""
        oid = object_id(uri)
        idx = self._proc()
        if idx.object_size(oid) != size:
            self._unlink_victims(idx.set_object(oid, uri, size, self.owner))

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
            filled = set(missing)
            for p in range(first, last + 1):
                if p not in filled:
                    self._pending_touch[(oid, p)] = len(pages[p])
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
            touch, pending, unlinked = self._pending_touch, self._pending, self._unlinked
            self._pending_touch, self._pending, self._unlinked = {}, {}, []
            self._last_flush = time.monotonic()
        if touch or pending or unlinked:
            victims = idx.touch(
                self.owner, dict(sorted(touch.items())), pending, self.config.budget_bytes, unlinked, self.store.exists
            )
            self.local.evictions += len(victims)
            self._unlink_victims(victims)

    def reconcile(self, grace_s: float = 60.0) -> dict[str, int]:
        """Full repair (a scan of every page file, see recovery.py): settle dead processes, delete
        temp leftovers and page files no row accounts for, drop rows whose file is gone, recount
        resident bytes. Safe while others run: files younger than `grace_s` are left alone."""
        return recovery.reconcile(self.recovery_site(), grace_s)

    def close(self) -> None:
        if self._pid == os.getpid() and self._index is not None:
            self._retire()
            self._index.close()
            for fd in self._lock_fds.values():
                os.close(fd)
        self._reset()

    def _retire(self) -> None:
        """Flush, drop this owner's remaining rows (its unlinks are done), unregister."""
        if self._owner is None or self._owner.fd is None:
            return
        self.flush()
        assert self._index is not None
        self._index.retire(self._owner.id)
        self._owner.close()

    # ------------------------------------------------------------ internals
    def _page_len(self, page: int, size: int) -> int:
        ps = self.config.page_size
        return min(ps, size - page * ps)

    def _fill(self, uri: str, oid: str, size: int, missing: list[int]) -> dict[int, bytes]:
        """Fetch missing pages once node-wide: lock their stripes (sorted: no deadlock), re-check
        the disk, reserve the still-missing pages in the index (counted, evicting as needed),
        fetch runs of them, write, commit; unlink the evicted pages once the stripes are free."""
        got: dict[int, bytes] = {}
        victims: list[Key] = []
        idx, owner = self._proc(), self.owner
        with self._stripes([(oid, p) for p in missing]):
            todo = []
            for p in missing:
                data = self.store.get(oid, p, self._page_len(p, size))
                if data is None:
                    todo.append(p)
                else:
                    got[p] = data
            if todo:
                with self._mutex:
                    counters = {"misses": len(todo), **self._pending}
                    self._pending, unlinked, self._unlinked = {}, self._unlinked, []
                    self.local.misses += len(todo)
                reserved, victims = idx.reserve(
                    owner,
                    [(oid, p, self._page_len(p, size)) for p in todo],
                    self.config.budget_bytes,
                    counters,
                    unlinked,
                )
                self.local.evictions += len(victims)
                written: list[Key] = []
                try:
                    fetched = 0
                    keep = {p for _, p in reserved}
                    for run in _runs(todo):
                        ps = self.config.page_size
                        start, stop = run[0] * ps, min(size, (run[-1] + 1) * ps)
                        data = self._fetch(uri, start, stop)
                        fetched += len(data)
                        for p in run:
                            got[p] = data[(p - run[0]) * ps : (p - run[0]) * ps + self._page_len(p, size)]
                            if p in keep:  # a read larger than the whole budget is served, not all stored
                                self.store.put(oid, p, got[p], owner)
                                written.append((oid, p))
                    self.local.bytes_fetched += fetched
                    with self._mutex:
                        self._pending["bytes_fetched"] = self._pending.get("bytes_fetched", 0) + fetched
                finally:
                    with self._mutex:
                        unlinked, self._unlinked = self._unlinked, []
                    idx.commit(owner, written, unlinked)
                    if len(written) < len(reserved):
                        done = set(written)
                        idx.release(owner, [k for k in reserved if k not in done])
            with self._mutex:  # served by another process's fetch: a hit for us
                self.local.hits += len(missing) - len(todo)
                self._pending["hits"] = self._pending.get("hits", 0) + len(missing) - len(todo)
        self._unlink_victims(victims)
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

    def _unlink_victims(self, victims: list[Key]) -> None:
        """Unlink evicted pages, each under its stripe lock and only while its doomed row is still
        ours (a process that re-fetched the page meanwhile took the row, and the file is its own)."""
        idx, owner = self._proc(), self.owner
        done = []
        for oid, p in victims:
            with self._stripes([(oid, p)]):
                if idx.still_doomed(owner, oid, p):
                    self.store.remove(oid, p)
            done.append((oid, p))
        with self._mutex:
            self._unlinked += done

    def _stripe(self, oid: str, page: int) -> int:
        return (int(oid[:8], 16) + page) % self.config.lock_stripes  # the same in every process

    @contextlib.contextmanager
    def _stripes(self, keys: list[Key]) -> Iterator[None]:
        """Hold the single-flight locks of these pages (taken in sorted order: no deadlock)."""
        held = []
        try:
            for s in sorted({self._stripe(o, p) for o, p in keys}):
                held.append(self._lock(s))
            yield
        finally:
            for s in reversed(held):
                self._unlock(s)

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


def _runs(pages: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for p in sorted(pages):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs
