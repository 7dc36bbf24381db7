"""Finding and reading a container's footer: the one or two reads an open costs.

One read of the file's tail (the whole file when it is at most 64 KB, which also covers the
header) finds the trailer and, usually, the whole footer. Footer hints from a catalog or
manifest replace the guess with the footer's exact place; they are checked against the file's
size before anything is read with them, then against the trailer.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from robodata.container.format import HEADER, TRAILER, decode_footer, unpack_header, unpack_trailer
from robodata.container.limits import ReaderConfig
from robodata.container.source import RangeSource
from robodata.errors import ContainerError, ContainerLimitError

TAIL_GUESS = 64 * 1024  # first read at open: trailer plus, usually, the whole footer


@dataclass(frozen=True)
class Located:
    doc: dict[str, Any]  # the footer's JSON document (CRC, format and version checked)
    offset: int
    length: int
    header_checked: bool


def locate_footer(source: RangeSource, footer_offset: Any, footer_length: Any, cfg: ReaderConfig) -> Located:
    """Read and decode the footer of `source`, with or without hints.

    Raises:
        ContainerError: no valid trailer, header or footer; hints that do not fit the file or its
            trailer; a short read (ContainerLimitError: a footer over cfg.max_footer_bytes).
    """
    name = source.name
    size = source.size()
    hints = footer_offset is not None and footer_length is not None
    if hints:
        fo, fl = _hint(name, footer_offset, footer_length, size, cfg)
        start = 0 if size <= TAIL_GUESS else fo
    else:
        start = max(0, size - TAIL_GUESS)
    tail = read_exact(source, name, start, size - start)
    if start == 0:
        unpack_header(name, tail)
    off, length, crc = unpack_trailer(name, tail[-TRAILER.size :], size, cfg.max_footer_bytes)
    if hints and (off, length) != (fo, fl):
        raise ContainerError(name, f"footer hint {fo}+{fl} does not match the trailer {off}+{length} (stale hint?)")
    inside = off >= start  # the footer usually lies in the tail already read
    footer = tail[off - start : off - start + length] if inside else read_exact(source, name, off, length)
    return Located(decode_footer(name, footer, crc), off, length, start == 0)


def _hint(name: str, footer_offset: Any, footer_length: Any, size: int, cfg: ReaderConfig) -> tuple[int, int]:
    """Footer hints from a caller, checked against the file before anything is read with them."""
    try:
        fo, fl = operator.index(footer_offset), operator.index(footer_length)
    except TypeError:
        why = f"footer hint {footer_offset!r}+{footer_length!r} is not a pair of integers"
        raise ContainerError(name, why) from None
    if fo < HEADER.size or fl < 0 or fo + fl + TRAILER.size != size:
        raise ContainerError(name, f"footer hint {fo}+{fl} does not fit a file of {size} bytes (stale hint?)")
    if fl > cfg.max_footer_bytes:
        raise ContainerLimitError(name, f"footer hint {fl:,} bytes is over ReaderConfig.max_footer_bytes")
    return fo, fl


def read_exact(source: RangeSource, name: str, offset: int, length: int) -> bytes:
    data = source.read(offset, length) if length > 0 else b""
    if len(data) != length:
        raise ContainerError(name, f"short read ({len(data)} of {length} bytes at {offset}): truncated file")
    return data
