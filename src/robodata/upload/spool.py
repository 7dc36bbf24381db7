"""The spool directory: which entries are finished episodes, and what files they hold.

See the package docstring for the completion protocols (``rename`` and ``marker``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from robodata.errors import RobodataError

PARTIAL_SUFFIX = ".partial"
DONE_SUFFIX = ".done"
MANIFEST_NAME = "_UPLOADED.json"  # reserved: the upstream manifest of a directory episode
COMPLETE_NAME = "_COMPLETE"  # a raw recording's own end marker (robodata.ingest): uploaded last


class SpoolError(RobodataError):
    """An episode in the spool cannot be uploaded as it is (symlink, special file, reserved name)."""


@dataclass(frozen=True)
class LocalFile:
    """One file as it was stat'ed. Any write through the file system changes size, mtime or ctime
    (a program can set mtime back, never ctime); a replacement by rename changes the inode."""

    relpath: str | None  # None for a file episode; "cam/000001.jpg" inside a directory episode
    path: Path
    size: int
    mtime_ns: int
    ctime_ns: int = 0
    ino: int = 0

    @staticmethod
    def of(relpath: str | None, path: Path, st: os.stat_result) -> LocalFile:
        return LocalFile(relpath, path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    @property
    def identity(self) -> tuple[int, int, int, int]:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino)


@dataclass(frozen=True)
class Episode:
    name: str
    path: Path
    is_dir: bool
    files: tuple[LocalFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def contents(self) -> tuple[tuple[str | None, int, int, int], ...]:
        """What identifies the files' contents wherever the episode lives (a rename changes a
        file's ctime, not its inode, size or mtime)."""
        return tuple((f.relpath, f.size, f.mtime_ns, f.ino) for f in self.files)

    def marker(self) -> Path:
        return self.path.with_name(self.name + DONE_SUFFIX)


def held_in(entries: list[str], record: Path) -> dict[str, str]:
    """Of the trash's `entries` (`entries_in`), those the last settle held (robodata.upload.trash),
    with why. An entry its record does not name is a delete in progress, or one the next start settles."""
    try:
        recorded = json.loads(record.read_text())
    except (OSError, ValueError):
        recorded = {}
    recorded = recorded if isinstance(recorded, dict) else {}
    return {name: str(recorded[name]) for name in entries if name in recorded}


def entries_in(folder: Path) -> list[str]:
    """The names in `folder`, sorted (none if it is missing): for the trash (robodata.upload.trash),
    its held entries or a delete in progress."""
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def ready_names(spool: Path, completion: str, min_age_s: float = 0.0) -> list[str]:
    """Names of finished episodes, oldest first. Never lists in-progress writes."""
    entries: dict[str, float] = {}
    names: set[str] = set()
    with os.scandir(spool) as it:
        for e in it:
            names.add(e.name)
            if e.name.startswith("."):
                continue
            try:
                entries[e.name] = e.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue
    out = []
    for name, mtime in entries.items():
        if name.endswith(PARTIAL_SUFFIX):
            continue
        if completion == "marker" and (name.endswith(DONE_SUFFIX) or name + DONE_SUFFIX not in names):
            continue
        if min_age_s and time.time() - mtime < min_age_s:
            continue
        out.append((mtime, name))
    return [n for _, n in sorted(out)]


def describe(spool: Path, name: str) -> Episode:
    """Stat a finished episode: its files with sizes and mtimes. Refuses links and special files."""
    path = spool / name
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise SpoolError(f"episode {name!r} is a symlink; refusing to follow it")
    if stat.S_ISREG(st.st_mode):
        return Episode(name, path, False, (LocalFile.of(None, path, st),))
    if not stat.S_ISDIR(st.st_mode):
        raise SpoolError(f"episode {name!r} is neither a file nor a directory")
    files = []
    for root, dirs, fnames in os.walk(path, followlinks=False):
        dirs.sort()
        for d in dirs:
            if os.path.islink(os.path.join(root, d)):
                raise SpoolError(f"episode {name!r} contains a symlinked directory {d!r}")
        for fn in sorted(fnames):
            p = Path(root) / fn
            fst = os.lstat(p)
            rel = p.relative_to(path).as_posix()
            if not stat.S_ISREG(fst.st_mode):
                raise SpoolError(f"episode {name!r}: {rel!r} is a symlink or special file")
            if rel == MANIFEST_NAME:
                raise SpoolError(f"episode {name!r}: {MANIFEST_NAME!r} is reserved for the upload manifest")
            files.append(LocalFile.of(rel, p, fst))
    # The episode's own completion marker goes up after every other file is verified, so an
    # importer waiting for it upstream never sees a half-uploaded episode.
    files.sort(key=lambda f: f.relpath == COMPLETE_NAME)
    return Episode(name, path, True, tuple(files))


def unchanged(f: LocalFile) -> bool:
    """True when the file still has the size, mtime, ctime and inode it had when it was stat'ed."""
    try:
        st = os.lstat(f.path)
    except FileNotFoundError:
        return False
    return LocalFile.of(f.relpath, f.path, st).identity == f.identity
