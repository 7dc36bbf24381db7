"""The shared page index: one SQLite database in WAL mode per cache directory.

Why SQLite (WAL, busy timeout) rather than a file lock + mmap table: every index change
(reserve pages, evict, commit, counters) is one ACID transaction, so a process killed with
SIGKILL mid-update leaves the index exactly as before that transaction (SQLite rolls the WAL
back on the next open); readers never block the writer; and "oldest pages first" is an
indexed query instead of a hand-written, crash-safe hash table. The hit path never touches
the index: a hit is a page file that exists (page files are renamed into place whole), so the
index only sees misses and batched LRU touches.

Every page file on disk is accounted for by a row, written *before* the file exists and
deleted only *after* the file is gone:

* ``inflight``: a page a process is fetching (owner = that process). Counted in
  ``resident_bytes`` from the moment it is reserved, so budget checks see it; moved to
  ``pages`` once its file is in place.
* ``pages``: a resident page (counted), evictable least recently used first.
* ``doomed``: an evicted page whose file its owner has yet to unlink (no longer counted:
  at most one eviction batch per live process).

A killed process therefore leaves only rows under its owner id: ``settle`` (run by the next
process that opens the cache, see recovery.py) adopts its finished page files and removes the
rest. ``resident_bytes`` = sum(pages.size) + sum(inflight.size).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robodata.errors import ConfigError

Key = tuple[str, int]  # (object id, page number)

COUNTERS = ("hits", "misses", "bytes_fetched", "evictions", "resident_bytes")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (oid TEXT NOT NULL, page INTEGER NOT NULL, size INTEGER NOT NULL,
                                  used INTEGER NOT NULL, PRIMARY KEY (oid, page)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pages_by_use ON pages (used);
CREATE TABLE IF NOT EXISTS objects (oid TEXT PRIMARY KEY, uri TEXT NOT NULL, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS inflight (oid TEXT NOT NULL, page INTEGER NOT NULL, size INTEGER NOT NULL,
                                     owner TEXT NOT NULL, PRIMARY KEY (oid, page)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS inflight_by_owner ON inflight (owner);
CREATE TABLE IF NOT EXISTS doomed (oid TEXT NOT NULL, page INTEGER NOT NULL, owner TEXT NOT NULL,
                                   PRIMARY KEY (oid, page)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doomed_by_owner ON doomed (owner);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class PageIndex:
    def __init__(self, path: Path, page_size: int, busy_timeout_s: float):
        self.path = path
        self.db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable against process death
        with self._tx():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.executemany("INSERT OR IGNORE INTO counters VALUES (?, 0)", [(c,) for c in COUNTERS])
            self.db.execute("INSERT OR IGNORE INTO settings VALUES ('page_size', ?)", (str(page_size),))
            stored = int(self.db.execute("SELECT value FROM settings WHERE name='page_size'").fetchone()[0])
        if stored != page_size:
            raise ConfigError(f"page cache {path.parent}: was created with page_size {stored}, not {page_size}")

    def _tx(self):
        return _Immediate(self.db)

    # ------------------------------------------------------------------ objects
    def object_size(self, oid: str) -> int | None:
        row = self.db.execute("SELECT size FROM objects WHERE oid=?", (oid,)).fetchone()
        return None if row is None else int(row[0])

    def set_object(self, oid: str, uri: str, size: int, owner: str) -> list[Key]:
        """Record an object's size; if it changed, its pages are doomed (returned, for unlinking)."""
        with self._tx():
            row = self.db.execute("SELECT size FROM objects WHERE oid=?", (oid,)).fetchone()
            if row is not None and int(row[0]) == size:
                return []
            gone = self.db.execute("SELECT page, size FROM pages WHERE oid=?", (oid,)).fetchall()
            if gone:
                self.db.execute("DELETE FROM pages WHERE oid=?", (oid,))
                self._add("resident_bytes", -sum(s for _, s in gone))
                self._doom(owner, [(oid, int(p)) for p, _ in gone])
            self.db.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?)", (oid, uri, size))
            return [(oid, int(p)) for p, _ in gone]

    # ------------------------------------------------------------------ pages
    def reserve(
        self, owner: str, pages: list[tuple[str, int, int]], budget: int, counters: dict[str, int], unlinked: list[Key]
    ) -> tuple[list[Key], list[Key]]:
        """Before a process writes page files: count them (rows in ``inflight``), first evicting
        least recently used pages so that resident bytes stay within the budget. Pages that do not
        fit even then (one read larger than the budget) are not reserved and must not be stored.
        Returns (reserved pages, evicted pages whose files the caller unlinks)."""
        with self._tx():
            self._forget_doomed(owner, unlinked)
            delta = 0
            for oid, page, _ in pages:
                # The caller holds the page's stripe lock and found no good file: any row left for
                # it (a file lost or torn, a dead fetcher's reservation) only over-counts. Drop it.
                for table in ("pages", "inflight"):
                    row = self.db.execute(
                        f"DELETE FROM {table} WHERE oid=? AND page=? RETURNING size", (oid, page)
                    ).fetchone()
                    delta -= int(row[0]) if row else 0
                self.db.execute("DELETE FROM doomed WHERE oid=? AND page=?", (oid, page))
            self._add("resident_bytes", delta)
            for name, v in counters.items():
                self._add(name, v)
            victims = self._evict_to(owner, budget - sum(size for _, _, size in pages))
            resident = self._get("resident_bytes")
            reserved: list[Key] = []
            for oid, page, size in pages:
                if resident + size <= budget:
                    self.db.execute("INSERT INTO inflight VALUES (?, ?, ?, ?)", (oid, page, size, owner))
                    resident += size
                    reserved.append((oid, page))
            self._add("resident_bytes", resident - self._get("resident_bytes"))
        return reserved, victims

    def commit(self, owner: str, keys: list[Key], unlinked: list[Key]) -> None:
        """Reserved pages whose files are now in place become resident pages (already counted)."""
        now = time.time_ns()
        with self._tx():
            self._forget_doomed(owner, unlinked)
            for oid, page in keys:
                row = self.db.execute(
                    "DELETE FROM inflight WHERE oid=? AND page=? AND owner=? RETURNING size", (oid, page, owner)
                ).fetchone()
                if row is not None:
                    self._move_to_pages(oid, page, int(row[0]), now)

    def release(self, owner: str, keys: list[Key]) -> None:
        """Reserved pages whose files were never written (the fetch failed): uncount them."""
        with self._tx():
            for oid, page in keys:
                row = self.db.execute(
                    "DELETE FROM inflight WHERE oid=? AND page=? AND owner=? RETURNING size", (oid, page, owner)
                ).fetchone()
                if row is not None:
                    self._add("resident_bytes", -int(row[0]))

    def touch(
        self,
        owner: str,
        hits: dict[Key, int],
        counters: dict[str, int],
        budget: int,
        unlinked: list[Key],
        exists: Callable[[str, int], bool],
    ) -> list[Key]:
        """LRU touches of pages served from disk. A page file served without any row (left by an
        older version, or by hand) is adopted: counted, and evictable. Returns evicted pages."""
        now = time.time_ns()
        with self._tx():
            self._forget_doomed(owner, unlinked)
            adopted = 0
            for (oid, page), size in hits.items():
                if self.db.execute("UPDATE pages SET used=? WHERE oid=? AND page=?", (now, oid, page)).rowcount:
                    continue
                if not self._claimed_by("inflight", "doomed", oid, page) and exists(oid, page):
                    self.db.execute("INSERT INTO pages VALUES (?, ?, ?, ?)", (oid, page, size, now))
                    self._add("resident_bytes", size)
                    adopted += 1
            for name, v in counters.items():
                self._add(name, v)
            victims = self._evict_to(owner, budget) if adopted else []
        return victims

    def retire(self, owner: str) -> None:
        """An owner closing: every unlink it owed is done; reservations it leaves are uncounted."""
        with self._tx():
            self.db.execute("DELETE FROM doomed WHERE owner=?", (owner,))
            row = self.db.execute("SELECT COALESCE(SUM(size), 0) FROM inflight WHERE owner=?", (owner,)).fetchone()
            self.db.execute("DELETE FROM inflight WHERE owner=?", (owner,))
            self._add("resident_bytes", -int(row[0]))

    def still_doomed(self, owner: str, oid: str, page: int) -> bool:
        return (
            self.db.execute("SELECT 1 FROM doomed WHERE oid=? AND page=? AND owner=?", (oid, page, owner)).fetchone()
            is not None
        )

    # ------------------------------------------------------------------ crashed owners
    def owners(self) -> set[str]:
        """Owners with rows in ``inflight`` or ``doomed`` (indexed: as many rows as owners)."""
        return {
            o for (o,) in self.db.execute("SELECT DISTINCT owner FROM inflight UNION SELECT DISTINCT owner FROM doomed")
        }

    def owner_rows(self, owner: str) -> tuple[list[tuple[str, int, int]], list[Key]]:
        inflight = [
            (o, int(p), int(s))
            for o, p, s in self.db.execute("SELECT oid, page, size FROM inflight WHERE owner=?", (owner,))
        ]
        doomed = [(o, int(p)) for o, p in self.db.execute("SELECT oid, page FROM doomed WHERE owner=?", (owner,))]
        return inflight, doomed

    def settle(self, owner: str, keep: set[Key]) -> list[Key]:
        """Resolve a dead owner's rows: its reserved pages in `keep` (whole files in place) become
        resident pages, the others are uncounted; its doomed rows go. Returns the doomed pages
        whose files must still be unlinked (those no other row claims)."""
        now = time.time_ns()
        with self._tx():
            for oid, page, size in self.db.execute(
                "DELETE FROM inflight WHERE owner=? RETURNING oid, page, size", (owner,)
            ).fetchall():
                if (oid, int(page)) in keep:
                    self._move_to_pages(oid, int(page), int(size), now)
                else:
                    self._add("resident_bytes", -int(size))
            doomed = self.db.execute("DELETE FROM doomed WHERE owner=? RETURNING oid, page", (owner,)).fetchall()
            out: list[Key] = []
            for oid, page in doomed:
                if not self._claimed_by("pages", "inflight", oid, page):
                    out.append((oid, int(page)))
        return out

    # ------------------------------------------------------------------ full scan (cache-reconcile)
    def rows(self) -> list[tuple[str, int, int]]:
        return [(o, int(p), int(s)) for o, p, s in self.db.execute("SELECT oid, page, size FROM pages")]

    def claimed(self) -> set[Key]:
        """Every (oid, page) some row accounts for (pages, inflight, doomed)."""
        q = "SELECT oid, page FROM pages UNION SELECT oid, page FROM inflight UNION SELECT oid, page FROM doomed"
        return {(o, int(p)) for o, p in self.db.execute(q)}

    def drop_rows(self, keys: list[Key]) -> None:
        with self._tx():
            for oid, page in keys:
                row = self.db.execute("DELETE FROM pages WHERE oid=? AND page=? RETURNING size", (oid, page)).fetchone()
                if row:
                    self._add("resident_bytes", -int(row[0]))

    def recount(self) -> None:
        with self._tx():
            total = self.db.execute(
                "SELECT (SELECT COALESCE(SUM(size), 0) FROM pages) + (SELECT COALESCE(SUM(size), 0) FROM inflight)"
            ).fetchone()[0]
            self.db.execute("UPDATE counters SET value=? WHERE name='resident_bytes'", (int(total),))

    # ------------------------------------------------------------------ internals
    def _evict_to(self, owner: str, limit: int) -> list[Key]:
        """Doom least recently used pages until resident bytes <= limit (or no page is left)."""
        victims: list[Key] = []
        resident = self._get("resident_bytes")
        while resident > limit:
            rows = self.db.execute("SELECT oid, page, size FROM pages ORDER BY used LIMIT 64").fetchall()
            if not rows:
                break
            freed = 0
            batch: list[Key] = []
            for oid, page, size in rows:
                if resident - freed <= limit:
                    break
                self.db.execute("DELETE FROM pages WHERE oid=? AND page=?", (oid, page))
                batch.append((oid, int(page)))
                freed += int(size)
            self._doom(owner, batch)
            victims += batch
            resident -= freed
            self._add("resident_bytes", -freed)
        self._add("evictions", len(victims))
        return victims

    def _claimed_by(self, *tables_and_key: Any) -> bool:
        *tables, oid, page = tables_and_key
        q = " UNION ALL ".join(f"SELECT 1 FROM {t} WHERE oid=? AND page=?" for t in tables)
        return self.db.execute(q, (oid, page) * len(tables)).fetchone() is not None

    def _doom(self, owner: str, keys: list[Key]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO doomed VALUES (?, ?, ?)", [(o, p, owner) for o, p in keys])

    def _forget_doomed(self, owner: str, keys: list[Key]) -> None:
        """Doomed rows of pages this owner has unlinked since its last transaction."""
        self.db.executemany("DELETE FROM doomed WHERE oid=? AND page=? AND owner=?", [(o, p, owner) for o, p in keys])

    def _move_to_pages(self, oid: str, page: int, size: int, now: int) -> None:
        old = self.db.execute("DELETE FROM pages WHERE oid=? AND page=? RETURNING size", (oid, page)).fetchone()
        if old is not None:
            self._add("resident_bytes", -int(old[0]))
        self.db.execute("INSERT INTO pages VALUES (?, ?, ?, ?)", (oid, page, size, now))

    # ------------------------------------------------------------------ counters
    def counters(self) -> dict[str, int]:
        return {n: int(v) for n, v in self.db.execute("SELECT name, value FROM counters")}

    def _get(self, name: str) -> int:
        return int(self.db.execute("SELECT value FROM counters WHERE name=?", (name,)).fetchone()[0])

    def _add(self, name: str, v: int) -> None:
        if v:
            self.db.execute("UPDATE counters SET value=value+? WHERE name=?", (int(v), name))

    def close(self) -> None:
        self.db.close()


class _Immediate:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): take the write lock up front, so two
    writers never deadlock upgrading read locks; the busy timeout makes others wait."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
