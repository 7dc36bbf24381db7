"""The uploader's local journal: a small sqlite database, durable across SIGKILL.

It remembers, per object being uploaded, the local digest (size, mtime, sha256, part MD5s),
the open multipart upload id, and how far the object got (hashed -> completed -> verified);
per episode whether it is verified (so a half-finished local delete is finished, never
re-uploaded); and the running counters. Rows of an episode are dropped once its local copy
is gone, so the journal stays small however many episodes pass through.

Every state change is one transaction (WAL). A SIGKILL never loses a committed transaction.
synchronous=NORMAL (no fsync per commit) means a power cut may roll the journal back a few
commits; that is safe because no decision to delete rests on the journal alone: an episode
leaves the spool only after this process re-read its upstream objects and found them intact,
and a rolled-back journal only makes the uploader redo work (re-hash, re-verify, re-upload).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    key TEXT PRIMARY KEY, episode TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    part_size INTEGER NOT NULL, sha256 TEXT NOT NULL, etag TEXT NOT NULL,
    upload_id TEXT, state TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS files_episode ON files (episode);
CREATE TABLE IF NOT EXISTS parts (
    key TEXT NOT NULL, part INTEGER NOT NULL, md5 TEXT NOT NULL, PRIMARY KEY (key, part));
CREATE TABLE IF NOT EXISTS episodes (
    name TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value REAL NOT NULL);
"""

FILE_STATES = ("hashed", "completed", "verified")


@dataclass(frozen=True)
class FileRecord:
    key: str
    episode: str
    size: int
    mtime_ns: int
    part_size: int
    sha256: str
    etag: str
    upload_id: str | None
    state: str


class Journal:
    """sqlite-backed journal. Stateful: state_dict() exports everything, load_state_dict() restores it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._pending: dict[str, float] = {}

    def close(self) -> None:
        self.flush()
        self.db.close()

    def _tx(self, statements: list[tuple[str, tuple]]) -> None:
        pending, self._pending = self._pending, {}
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements + self._bump_sql(pending):
                self.db.execute(sql, args)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            for k, v in pending.items():
                self._pending[k] = self._pending.get(k, 0.0) + v
            raise

    # files -------------------------------------------------------------------------------
    def file(self, key: str) -> FileRecord | None:
        row = self.db.execute(
            "SELECT key, episode, size, mtime_ns, part_size, sha256, etag, upload_id, state FROM files WHERE key = ?",
            (key,),
        ).fetchone()
        return FileRecord(*row) if row else None

    def files_of(self, episode: str) -> list[FileRecord]:
        rows = self.db.execute(
            "SELECT key, episode, size, mtime_ns, part_size, sha256, etag, upload_id, state FROM files"
            " WHERE episode = ? ORDER BY key",
            (episode,),
        )
        return [FileRecord(*r) for r in rows]

    def put_file(self, rec: FileRecord, part_md5s: list[str]) -> None:
        """Record a freshly hashed object (replacing any older record of the key)."""
        self._tx(
            [
                ("DELETE FROM parts WHERE key = ?", (rec.key,)),
                (
                    "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        rec.key,
                        rec.episode,
                        rec.size,
                        rec.mtime_ns,
                        rec.part_size,
                        rec.sha256,
                        rec.etag,
                        rec.upload_id,
                        rec.state,
                    ),
                ),
                *[("INSERT INTO parts VALUES (?,?,?)", (rec.key, i + 1, m)) for i, m in enumerate(part_md5s)],
            ]
        )

    def part_md5s(self, key: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT md5 FROM parts WHERE key = ? ORDER BY part", (key,))]

    def set_upload_id(self, key: str, upload_id: str | None) -> None:
        self._tx([("UPDATE files SET upload_id = ? WHERE key = ?", (upload_id, key))])

    def set_file_state(self, key: str, state: str, counters: dict[str, float] | None = None) -> None:
        assert state in FILE_STATES, state
        stmts = [("UPDATE files SET state = ?, upload_id = NULL WHERE key = ?", (state, key))]
        self._tx(stmts + self._bump_sql(counters or {}))

    def forget_file(self, key: str) -> None:
        self._tx([("DELETE FROM parts WHERE key = ?", (key,)), ("DELETE FROM files WHERE key = ?", (key,))])

    def open_uploads(self) -> list[tuple[str, str]]:
        return list(self.db.execute("SELECT key, upload_id FROM files WHERE upload_id IS NOT NULL"))

    # episodes ----------------------------------------------------------------------------
    def episode_state(self, name: str) -> tuple[str, str] | None:
        row = self.db.execute("SELECT state, detail FROM episodes WHERE name = ?", (name,)).fetchone()
        return (row[0], row[1]) if row else None

    def set_episode(self, name: str, state: str, detail: str = "", counters: dict[str, float] | None = None) -> None:
        self._tx(
            [("INSERT OR REPLACE INTO episodes VALUES (?,?,?)", (name, state, detail)), *self._bump_sql(counters or {})]
        )

    def episodes(self, state: str) -> list[tuple[str, str]]:
        return list(self.db.execute("SELECT name, detail FROM episodes WHERE state = ? ORDER BY name", (state,)))

    def drop_episode(self, name: str, counters: dict[str, float] | None = None) -> None:
        """Forget an episode whose local copy is gone (after verification)."""
        self._tx(
            [
                ("DELETE FROM parts WHERE key IN (SELECT key FROM files WHERE episode = ?)", (name,)),
                ("DELETE FROM files WHERE episode = ?", (name,)),
                ("DELETE FROM episodes WHERE name = ?", (name,)),
                *self._bump_sql(counters or {}),
            ]
        )

    # counters ----------------------------------------------------------------------------
    @staticmethod
    def _bump_sql(counters: dict[str, float]) -> list[tuple[str, tuple]]:
        return [
            (
                "INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                (k, float(v)),
            )
            for k, v in counters.items()
            if v
        ]

    def bump(self, **counters: float) -> None:
        """Count in memory; written with the next state change or flush() (one fsync, not one per part)."""
        for k, v in counters.items():
            self._pending[k] = self._pending.get(k, 0.0) + v

    def flush(self) -> None:
        if self._pending:
            self._tx([])

    def counters(self) -> dict[str, float]:
        out = {k: v for k, v in self.db.execute("SELECT name, value FROM counters")}
        for k, v in self._pending.items():
            out[k] = out.get(k, 0.0) + v
        return out

    # Stateful ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        self.flush()
        tables = ("files", "parts", "episodes", "counters")
        return {t: [list(r) for r in self.db.execute(f"SELECT * FROM {t}")] for t in tables}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        stmts: list[tuple[str, tuple]] = []
        for table, width in (("files", 9), ("parts", 3), ("episodes", 3), ("counters", 2)):
            stmts.append((f"DELETE FROM {table}", ()))
            marks = ",".join("?" * width)
            stmts += [(f"INSERT INTO {table} VALUES ({marks})", tuple(r)) for r in state_dict.get(table, [])]
        self._tx(stmts)
