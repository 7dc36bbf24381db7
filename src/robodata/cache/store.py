"""Page files on local disk: one file per cached page, written atomically.

A page file is a 16-byte header (magic, payload length, CRC-32) followed by the payload.
Writes go to a temporary file in the same directory and are renamed into place
(os.replace is atomic), so a reader sees either no page or a whole page, even when the
writer is killed with SIGKILL half way through.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from pathlib import Path

_HEADER = struct.Struct("<4sIII")  # magic, length, crc32, reserved
_MAGIC = b"RDPG"
TMP_SUFFIX = ".tmp"


class PageStore:
    def __init__(self, root: Path, verify: bool):
        self.dir = root / "pages"
        self.verify = verify
        for i in range(256):
            (self.dir / f"{i:02x}").mkdir(parents=True, exist_ok=True)

    def path(self, oid: str, page: int) -> Path:
        return self.dir / oid[:2] / f"{oid}.{page}"

    def get(self, oid: str, page: int, expected_len: int) -> bytes | None:
        """The page payload, or None when absent, short or corrupt (a corrupt file is removed)."""
        p = self.path(oid, page)
        try:
            with open(p, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        if len(raw) >= _HEADER.size:
            magic, length, crc, _ = _HEADER.unpack_from(raw)
            payload = raw[_HEADER.size :]
            if (
                magic == _MAGIC
                and length == expected_len == len(payload)
                and (not self.verify or (zlib.crc32(payload) & 0xFFFFFFFF) == crc)
            ):
                return payload
        self.remove(oid, page)
        return None

    def tmp_path(self, oid: str, page: int, owner: str) -> Path:
        """Where `owner` ("<pid>.<token>") writes a page before renaming it into place."""
        final = self.path(oid, page)
        return final.with_name(f".{final.name}.{owner}{TMP_SUFFIX}")

    def put(self, oid: str, page: int, payload: bytes, owner: str) -> None:
        final = self.path(oid, page)
        tmp = self.tmp_path(oid, page, owner)
        head = _HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload) & 0xFFFFFFFF, 0)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                os.write(fd, head)
                view = memoryview(payload)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def whole(self, oid: str, page: int, size: int) -> bool:
        """A page file of the right length is in place (files are renamed into place whole)."""
        try:
            return os.stat(self.path(oid, page)).st_size == _HEADER.size + size
        except FileNotFoundError:
            return False

    def exists(self, oid: str, page: int) -> bool:
        return os.path.exists(self.path(oid, page))

    def remove(self, oid: str, page: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(oid, page))

    def remove_tmp(self, oid: str, page: int, owner: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp_path(oid, page, owner))

    def scan(self):
        """Yield (oid, page, path) for every page file and (None, None, path) for temp leftovers."""
        for sub in self.dir.iterdir():
            if not sub.is_dir():
                continue
            for entry in os.scandir(sub):
                name = entry.name
                if name.endswith(TMP_SUFFIX):
                    yield None, None, Path(entry.path)
                    continue
                oid, _, page = name.rpartition(".")
                if oid and page.isdigit():
                    yield oid, int(page), Path(entry.path)
