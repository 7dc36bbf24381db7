"""How a format tells that a landed file is whole (its completion marker inside the file), for the
landing settle logic (robodata.ingest.landing.settle). Folder formats are whole once their marker
file is there (Format.markers); a file format says it from the file's own bytes.

Each check takes the open file (binary, seekable) and its size, and answers whether the file is
complete; a file it cannot judge is whole (settling is all that is known: ingestion says why).
"""

from __future__ import annotations

import struct
from typing import BinaryIO

MCAP_MAGIC = b"\x89MCAP0\r\n"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def mcap(f: BinaryIO, size: int) -> bool:
    """An MCAP file ends with its footer's magic."""
    f.seek(max(size - len(MCAP_MAGIC), 0))
    return f.read(len(MCAP_MAGIC)) == MCAP_MAGIC


def hdf5(f: BinaryIO, size: int) -> bool:
    """An HDF5 file is as long as its superblock's end-of-file address."""
    f.seek(0)
    eof = hdf5_eof(f.read(128))
    return eof is None or size >= eof


def hdf5_eof(head: bytes) -> int | None:
    """The end-of-file address of an HDF5 superblock at offset 0 (None when not found)."""
    if not head.startswith(HDF5_MAGIC) or len(head) < 24:
        return None
    version = head[8]
    if version in (0, 1):
        size_o = head[13]
        at = 24 + (4 if version == 1 else 0) + 2 * size_o  # base address, free-space address
    elif version in (2, 3):
        size_o = head[9]
        at = 12 + 2 * size_o  # base address, superblock extension address
    else:
        return None
    fmt = {4: "<I", 8: "<Q"}.get(size_o)
    if fmt is None or len(head) < at + size_o:
        return None
    return int(struct.unpack_from(fmt, head, at)[0])
