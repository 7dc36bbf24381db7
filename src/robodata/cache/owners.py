"""Which processes use a page cache, and which of them have died.

Every process that opens a cache registers an owner id ``<pid>.<token>`` as a file under
``<root>/owners/`` and holds an exclusive ``flock`` on it for as long as it lives. The kernel
drops the lock when the process dies, however it dies (SIGKILL included), so an owner whose
lock another process can take is dead. (A lock, not the pid: pids are reused.)

The file is created under a temporary name, locked, then renamed into place, so an owner
file that can be seen is always locked while its process lives. A forked child closes its
copy of the parent's descriptor (the parent's lock stays held by the parent's descriptor).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"
_live: weakref.WeakSet[Owner] = weakref.WeakSet()


class Owner:
    def __init__(self, root: Path):
        self.dir = root / "owners"
        self.dir.mkdir(exist_ok=True)
        self.pid = os.getpid()
        self.id = f"{self.pid}.{secrets.token_hex(4)}"
        tmp = self.dir / f".{self.id}{TMP_SUFFIX}"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(tmp, self.dir / self.id)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self.fd: int | None = fd
        _live.add(self)

    def close(self) -> None:
        """Unregister (after the owner's rows are gone): remove the file, then drop the lock."""
        if self.fd is not None and self.pid == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / self.id)
            os.close(self.fd)
        self.fd = None

    def _forget_in_child(self) -> None:
        if self.fd is not None and self.pid != os.getpid():
            with contextlib.suppress(OSError):
                os.close(self.fd)  # the child's copy only: the parent keeps its lock
            self.fd = None


def _after_fork_in_child() -> None:
    for owner in list(_live):
        owner._forget_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _try_lock(path: Path) -> int | None:
    """An fd holding the lock of `path` when nobody else holds it (its owner is dead), else None."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _registering(tmp: Path) -> bool:
    """A temp owner file may be unlocked for an instant (created, not yet locked): leave it alone
    while its process lives, unless it is old (the pid was reused)."""
    try:
        pid = int(tmp.name[1:].split(".")[0])
        age = time.time() - tmp.stat().st_mtime
    except (ValueError, FileNotFoundError):
        return True
    if age > 3600:
        return False
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this host (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def dead(root: Path, me: str, with_rows: set[str]) -> Iterator[list[str]]:
    """Dead owners, held (their locks taken) for the duration: every locked-free owner file, plus
    owners that still have index rows (`with_rows`) but no file. Their files are removed on exit.

    Cost: one open + one non-blocking flock per owner file (live processes and dead ones not yet
    settled); independent of the number of cached pages.
    """
    d = root / "owners"
    held: dict[str, int] = {}
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        names = []
    for name in names:
        if name == me:
            continue
        registering = name.startswith(".") and name.endswith(TMP_SUFFIX)
        if registering and _registering(d / name):
            continue
        fd = _try_lock(d / name)
        if fd is None:
            continue
        if registering:  # killed while registering (it has no rows): just remove the file
            with contextlib.suppress(FileNotFoundError):
                os.unlink(d / name)
            os.close(fd)
            continue
        held[name] = fd
    present = set(names)
    out = sorted(set(held) | {o for o in with_rows if o != me and o not in present})
    try:
        yield out
    finally:
        for name, fd in held.items():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(d / name)
            os.close(fd)
