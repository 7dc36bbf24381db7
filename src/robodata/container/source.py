"""Byte-range sources: the only I/O interface the container reader needs.

A RangeSource reads exact byte ranges of one object (local file, fsspec URL such as
s3://bucket/key, a seekable file-like, or the node page cache). Every read is counted,
so benchmarks and tests can see what a window really touched.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import IO, Any, Protocol, runtime_checkable

from robodata.errors import ContainerError


@runtime_checkable
class RangeSource(Protocol):
    """What EpisodeReader reads from: a name for messages, a size and ranged reads."""

    name: str

    def size(self) -> int:
        """Size in bytes."""
        ...

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (fewer only at the end of the object)."""
        ...


@dataclass
class ReadStats:
    range_reads: int = 0
    bytes_read: int = 0

    def add(self, n: int) -> None:
        self.range_reads += 1
        self.bytes_read += n


class LocalFileSource:
    """A local file read with os.pread (thread- and fork-safe: no shared file offset)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = os.fspath(path)
        self._fd = os.open(self.name, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self.stats = ReadStats()

    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        self.stats.add(len(data))
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


class FileLikeSource:
    """Any seekable binary file-like object (e.g. an fsspec OpenFile opened with cache_type='none')."""

    def __init__(self, fileobj: IO[bytes], name: str | None = None):
        self._f = fileobj
        self.name = name or str(getattr(fileobj, "path", None) or getattr(fileobj, "name", "<file>"))
        self._f.seek(0, os.SEEK_END)
        self._size = self._f.tell()
        self.stats = ReadStats()

    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        self._f.seek(offset)
        data = self._f.read(length)
        self.stats.add(len(data))
        return data


class FsspecSource:
    """An object behind any fsspec filesystem, read with true range requests (cat_file)."""

    def __init__(self, fs: Any, path: str):
        self.fs = fs
        self.path = path
        self.name = fs.unstrip_protocol(path) if hasattr(fs, "unstrip_protocol") else path
        self._size: int | None = None
        self.stats = ReadStats()

    def size(self) -> int:
        if self._size is None:
            self._size = int(self.fs.size(self.path))
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        end = min(offset + length, self.size())
        if end <= offset:
            return b""
        data = self.fs.cat_file(self.path, start=offset, end=end)
        self.stats.add(len(data))
        return data


def open_source(target: Any, **storage_options: Any) -> RangeSource:
    """Turn a path, URL, file-like or RangeSource into a RangeSource.

    Raises:
        ContainerError: `target` is none of those.
        OSError: a local file cannot be opened.
    """
    if isinstance(target, RangeSource):
        return target
    if isinstance(target, (str, os.PathLike)):
        s = os.fspath(target)
        if "://" not in s or s.startswith("file://"):
            return LocalFileSource(s.removeprefix("file://"))
        import fsspec

        fs, path = fsspec.core.url_to_fs(s, **storage_options)
        return FsspecSource(fs, path)
    if hasattr(target, "seek") and hasattr(target, "read"):
        return FileLikeSource(target)
    raise ContainerError(repr(target)[:80], f"cannot read a container from a {type(target).__name__}")
