"""The shared page index: one SQLite database in WAL mode per cache directory.

Why SQLite (WAL, busy timeout) rather than a file lock + mmap table: every index change
(add pages, evict, counters) is one ACID transaction, so a process killed with SIGKILL
mid-update leaves the index exactly as before that transaction (SQLite rolls the WAL
back on the next open); readers never block the writer; and "oldest pages first" is an
indexed query instead of a hand-written, crash-safe hash table. The hit path never
touches the index: a hit is a page file that exists (page files are renamed into place
whole), so the index only sees misses and batched LRU touches.

Rows are written *after* their page file exists, and files are unlinked *after* their
rows are deleted. A crash between the two leaves at worst a file without a row (an
orphan, removed by `reconcile`) or a row without a file (over-counted until evicted;
reading it is just a miss).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from robodata.errors import ConfigError

COUNTERS = ("hits", "misses", "bytes_fetched", "evictions", "resident_bytes")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (oid TEXT NOT NULL, page INTEGER NOT NULL, size INTEGER NOT NULL,
                                  used INTEGER NOT NULL, PRIMARY KEY (oid, page)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pages_by_use ON pages (used);
CREATE TABLE IF NOT EXISTS objects (oid TEXT PRIMARY KEY, uri TEXT NOT NULL, size INTEGER NOT NULL);
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

    def set_object(self, oid: str, uri: str, size: int) -> list[tuple[str, int]]:
        """Record an object's size; if it changed, drop its pages (returned, for unlinking)."""
        with self._tx():
            row = self.db.execute("SELECT size FROM objects WHERE oid=?", (oid,)).fetchone()
            if row is not None and int(row[0]) == size:
                return []
            gone = self.db.execute("SELECT page, size FROM pages WHERE oid=?", (oid,)).fetchall()
            if gone:
                self.db.execute("DELETE FROM pages WHERE oid=?", (oid,))
                self._add("resident_bytes", -sum(s for _, s in gone))
            self.db.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?)", (oid, uri, size))
            return [(oid, p) for p, _ in gone]

    # ------------------------------------------------------------------ pages
    def add_pages(
        self, pages: list[tuple[str, int, int]], budget: int, counters: dict[str, int]
    ) -> list[tuple[str, int]]:
        """Insert (oid, page, size) rows, fold in counters, evict least recently used pages
        until resident bytes fit the budget. Returns the evicted (oid, page) to unlink."""
        now = time.time_ns()
        victims: list[tuple[str, int]] = []
        with self._tx():
            delta = 0
            for oid, page, size in pages:
                old = self.db.execute("SELECT size FROM pages WHERE oid=? AND page=?", (oid, page)).fetchone()
                delta += size - (int(old[0]) if old else 0)
                self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)", (oid, page, size, now))
            self._add("resident_bytes", delta)
            for name, v in counters.items():
                self._add(name, v)
            resident = self._get("resident_bytes")
            while resident > budget:
                rows = self.db.execute("SELECT oid, page, size FROM pages ORDER BY used LIMIT 64").fetchall()
                if not rows:
                    break
                freed = 0
                for oid, page, size in rows:
                    if resident - freed <= budget:
                        break
                    self.db.execute("DELETE FROM pages WHERE oid=? AND page=?", (oid, page))
                    victims.append((oid, int(page)))
                    freed += int(size)
                resident -= freed
                self._add("resident_bytes", -freed)
            self._add("evictions", len(victims))
        return victims

    def touch(self, keys: Iterable[tuple[str, int]], counters: dict[str, int]) -> None:
        now = time.time_ns()
        with self._tx():
            self.db.executemany("UPDATE pages SET used=? WHERE oid=? AND page=?", [(now, o, p) for o, p in keys])
            for name, v in counters.items():
                self._add(name, v)

    def has(self, oid: str, page: int) -> bool:
        return self.db.execute("SELECT 1 FROM pages WHERE oid=? AND page=?", (oid, page)).fetchone() is not None

    def rows(self) -> list[tuple[str, int, int]]:
        return [(o, int(p), int(s)) for o, p, s in self.db.execute("SELECT oid, page, size FROM pages")]

    def drop_rows(self, keys: list[tuple[str, int]]) -> None:
        with self._tx():
            for oid, page in keys:
                row = self.db.execute("DELETE FROM pages WHERE oid=? AND page=? RETURNING size", (oid, page)).fetchone()
                if row:
                    self._add("resident_bytes", -int(row[0]))

    def recount(self) -> None:
        with self._tx():
            total = self.db.execute("SELECT COALESCE(SUM(size), 0) FROM pages").fetchone()[0]
            self.db.execute("UPDATE counters SET value=? WHERE name='resident_bytes'", (int(total),))

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
