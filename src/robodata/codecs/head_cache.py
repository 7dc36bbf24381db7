"""The reads libavformat makes to open a file, kept in this process for the file's next open.

Opening an MP4 reads its header, the `moov` box (every sample's size, time and offset: it grows
with the file's frame count), and for the stream parameters its first packets. A LeRobot v3.0
video file holds many episodes, and each episode's read opens it again: every episode paid the
whole header once more (bench.ingest `reads`, synthetic LeRobot v3.0: 2 episodes a file, the
second open ~8 % of the file). Here the bytes each read returned while a file was being opened
are kept, as byte ranges, under the file's identity (real path, size, modification time, inode): a read
of bytes they hold (the demuxer going back to the first packet after the open; the file's next
open in this process, which libavformat makes with the same reads) is served from memory. What is
read after the open (the packets) is not kept.
Bounded: HEAD_MAX_BYTES a file (a header past it is not kept), HEAD_FILES files, least recently
opened out.
"""

from __future__ import annotations

import bisect
import io
import os
import threading
from collections import OrderedDict

HEAD_MAX_BYTES = 4 << 20
HEAD_FILES = 16

Ranges = list[tuple[int, bytes]]  # (offset, bytes) read, ascending, never overlapping

_lock = threading.Lock()
_heads: OrderedDict[tuple[str, int, int, int, int], Ranges] = OrderedDict()


def _identity(path: str, fd: int) -> tuple[str, int, int, int, int]:
    """(real path, size, modification time, device, inode): a file replaced at the path is another."""
    st = os.fstat(fd)
    return os.path.realpath(path), int(st.st_size), int(st.st_mtime_ns), int(st.st_dev), int(st.st_ino)


def _held(ranges: Ranges, pos: int, end: int) -> bytes:
    """The bytes from `pos` towards `end` that one kept range holds (b"": none)."""
    k = bisect.bisect_right(ranges, pos, key=lambda r: r[0]) - 1
    if k < 0:
        return b""
    at, data = ranges[k]
    return data[pos - at : end - at] if pos < at + len(data) else b""


def _keep(ranges: Ranges, pos: int, data: bytes) -> None:
    """Add a read (of bytes no kept range holds) to the kept ranges, joined to the one it continues."""
    k = bisect.bisect_right(ranges, pos, key=lambda r: r[0])
    if k > 0 and ranges[k - 1][0] + len(ranges[k - 1][1]) == pos:
        ranges[k - 1] = (ranges[k - 1][0], ranges[k - 1][1] + data)
    else:
        ranges.insert(k, (pos, data))


class HeadCachedFile(io.RawIOBase):
    """A local file read unbuffered; what its open read is kept (and served to reads of the same
    bytes, in this open and the file's next ones); `opened()` ends the open."""

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__()
        self._f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self._key = _identity(os.fspath(path), self._f.fileno())
        with _lock:
            known = _heads.get(self._key)
            if known is not None:
                _heads.move_to_end(self._key)
        self._recording = known is None
        self._ranges: Ranges = [] if known is None else known
        self._kept_bytes = 0
        self._pos = 0
        self._at = 0  # the file's own position
        self._opening = True
        self.disk_bytes = 0  # what the file itself returned (the rest came from the kept head)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._pos = offset
        elif whence == os.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = self._key[1] + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._key[1] if size < 0 else min(self._key[1], self._pos + size)
        head = _held(self._ranges, self._pos, end) if end > self._pos else b""
        if len(head) == end - self._pos:
            self._pos = end
            return head
        at = self._pos + len(head)  # the rest from the file
        if self._at != at:
            self._f.seek(at)
        rest = self._f.read(end - at) or b""
        self.disk_bytes += len(rest)
        self._at = at + len(rest)
        if self._opening and self._recording and self._kept_bytes + len(rest) <= HEAD_MAX_BYTES and rest:
            _keep(self._ranges, at, rest)
            self._kept_bytes += len(rest)
        self._pos = at + len(rest)
        return head + rest

    def opened(self) -> None:
        """The open is over: what it read is kept for the file's next open (when it fit the budget)."""
        if self._opening and self._recording and self._kept_bytes < HEAD_MAX_BYTES:
            with _lock:
                _heads[self._key] = self._ranges
                while len(_heads) > HEAD_FILES:
                    _heads.popitem(last=False)
        self._opening = False

    def close(self) -> None:
        self._f.close()
        super().close()
