"""Local digests: sha256 of the whole file and the MD5 of every part, in one read.

The expected ETag follows S3's rules: the plain MD5 for a single PUT, and
``md5(concat(part_md5_digests))-<n>`` for a multipart upload. The server computes it from
the bytes it stored, so a matching ETag means the stored bytes are the local bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Digest:
    size: int
    sha256: str
    part_size: int
    part_md5s: tuple[str, ...]  # one per part; a single entry for a single PUT

    @property
    def multipart(self) -> bool:
        return self.size > self.part_size

    @property
    def etag(self) -> str:
        return expected_etag(self.part_md5s, self.multipart)


def expected_etag(part_md5s: list[str] | tuple[str, ...], multipart: bool) -> str:
    if not multipart:
        return part_md5s[0]
    combined = hashlib.md5(b"".join(bytes.fromhex(m) for m in part_md5s)).hexdigest()
    return f"{combined}-{len(part_md5s)}"


def digest_file(path: Path, part_size: int) -> Digest:
    """Hash `path` with bounded memory (one READ_CHUNK at a time)."""
    sha = hashlib.sha256()
    md5s: list[str] = []
    size = 0
    with open(path, "rb") as f:
        while True:
            part = hashlib.md5()
            left = part_size
            got = 0
            while left:
                buf = f.read(min(READ_CHUNK, left))
                if not buf:
                    break
                sha.update(buf)
                part.update(buf)
                got += len(buf)
                left -= len(buf)
            if got == 0 and md5s:
                break
            md5s.append(part.hexdigest())
            size += got
            if got < part_size:
                break
    return Digest(size, sha.hexdigest(), part_size, tuple(md5s))


def read_part(path: Path, part_number: int, part_size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek((part_number - 1) * part_size)
        return f.read(part_size)


def clean_etag(etag: str | None) -> str:
    return (etag or "").strip().strip('"').lower()
