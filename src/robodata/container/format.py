"""On-disk framing of an episode container (see docs/container-format.md).

    [header 16 B][chunk][chunk]...[footer JSON][trailer 24 B]

header  = b"RDEP" | u16 version | u16 flags | 8 reserved bytes
trailer = u64 footer_offset | u64 footer_length | u32 crc32(footer) | b"RDEP"
A chunk is the concatenation of its parts (one Arrow IPC stream per stream of the group).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from robodata.errors import ContainerError, ContainerLimitError

MAGIC = b"RDEP"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sHH8x")
TRAILER = struct.Struct("<QQI4s")
FORMAT_NAME = "robodata.episode"


def checksum(data: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


_CRC_POLY = 0xEDB88320  # zlib's CRC-32 polynomial, reflected


def _multmodp(a: int, b: int) -> int:
    """a x b modulo the CRC-32 polynomial, bits reflected (zlib's multmodp)."""
    m, p = 1 << 31, 0
    while a:
        if a & m:
            p ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _CRC_POLY if b & 1 else b >> 1
    return p


_X2N = [1 << 30]  # x^(2^k) modulo the polynomial (zlib's x2n_table)
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from crc1 = CRC-32(A), crc2 = CRC-32(B) and len(B) (zlib's
    crc32_combine, which Python's zlib does not expose): a chunk's checksum without a second
    pass over its parts' bytes."""
    if not crc1:  # A's CRC shifted past B is 0 x^(8 len2) = 0: a chunk's first part costs nothing
        return crc2 & 0xFFFFFFFF
    p, k, n = 1 << 31, 3, len2  # x^(8 x len2): the CRC of A shifted past B's bytes
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return (_multmodp(p, crc1) ^ crc2) & 0xFFFFFFFF


def pack_header() -> bytes:
    return HEADER.pack(MAGIC, FORMAT_VERSION, 0)


@dataclass(frozen=True)
class PartInfo:
    """Index entry of one stream's part of a chunk."""

    stream: str
    offset: int  # relative to the chunk start
    length: int
    checksum: int
    t_start: int  # ns, first sample in this part
    t_end: int  # ns, last sample in this part
    count: int  # samples (frames, rows, events)

    def to_json(self) -> list[Any]:
        return [self.stream, self.offset, self.length, self.checksum, self.t_start, self.t_end, self.count]

    @classmethod
    def from_json(cls, v: list[Any]) -> PartInfo:
        return cls(*v)


@dataclass(frozen=True)
class ChunkInfo:
    """Index entry of one chunk: one topic group over one time span, and its parts."""

    index: int
    group: str
    t_start: int
    t_end: int
    offset: int
    length: int
    checksum: int
    parts: tuple[PartInfo, ...]

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(p.stream for p in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "i": self.index,
            "group": self.group,
            "t0": self.t_start,
            "t1": self.t_end,
            "off": self.offset,
            "len": self.length,
            "crc": self.checksum,
            "parts": [p.to_json() for p in self.parts],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChunkInfo:
        return cls(
            d["i"],
            d["group"],
            d["t0"],
            d["t1"],
            d["off"],
            d["len"],
            d["crc"],
            tuple(PartInfo.from_json(p) for p in d["parts"]),
        )


def encode_footer(
    meta: dict[str, Any], layout: dict[str, Any], codec_data: dict[str, str], chunks: list[ChunkInfo]
) -> bytes:
    doc = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "meta": meta,
        "layout": layout,
        "codec_data": codec_data,
        "chunks": [c.to_json() for c in chunks],
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def pack_trailer(footer_offset: int, footer: bytes) -> bytes:
    return TRAILER.pack(footer_offset, len(footer), checksum(footer), MAGIC)


def unpack_header(episode: str, raw: bytes) -> None:
    """Check the 16-byte file header: magic, a version this reader knows, no unknown flags."""
    if len(raw) < HEADER.size:
        raise ContainerError(episode, f"file too short ({len(raw)} bytes) for a container header")
    magic, version, flags = HEADER.unpack(raw[: HEADER.size])
    if magic != MAGIC:
        raise ContainerError(episode, f"header magic is {magic!r}, not {MAGIC!r} (not a robodata container)")
    if version != FORMAT_VERSION:
        raise ContainerError(episode, f"header says container version {version}, this reader knows {FORMAT_VERSION}")
    if flags != 0:
        raise ContainerError(episode, f"header flags {flags:#06x} are not defined in version {FORMAT_VERSION}")


def unpack_trailer(episode: str, raw: bytes, size: int, max_footer: int) -> tuple[int, int, int]:
    """(footer_offset, footer_length, crc) from the last 24 bytes of a file of `size` bytes.

    The footer must lie between the header and the trailer and be at most `max_footer` bytes."""
    if len(raw) != TRAILER.size or size < HEADER.size + TRAILER.size:
        raise ContainerError(episode, f"file too short ({size} bytes) to be a robodata container")
    off, length, crc, magic = TRAILER.unpack(raw)
    if magic != MAGIC:
        raise ContainerError(
            episode, "no container trailer at end of file (truncated, still being written, or not a robodata container)"
        )
    if off + length + TRAILER.size != size or off < HEADER.size:
        raise ContainerError(
            episode,
            f"trailer points to footer at {off}+{length}, inconsistent with size {size} (truncated or appended to)",
        )
    if length > max_footer:
        raise ContainerLimitError(
            episode, f"footer is {length:,} bytes, over ReaderConfig.max_footer_bytes = {max_footer:,}"
        )
    return off, length, crc


def _json_type(value: object) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), "null"
    )


def decode_footer(episode: str, raw: bytes, crc: int | None) -> dict[str, Any]:
    """The footer's JSON document after its CRC, format name and version are checked."""
    if crc is not None and checksum(raw) != crc:
        raise ContainerError(episode, "footer checksum mismatch (corrupted index)")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ContainerError(episode, f"footer is not valid JSON: {exc}") from None
    except RecursionError:
        raise ContainerError(episode, "footer JSON is nested too deeply") from None
    if not isinstance(doc, dict):
        raise ContainerError(episode, f"footer is a JSON {type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT_NAME:
        raise ContainerError(episode, f"footer format {str(doc.get('format'))[:60]!r} is not {FORMAT_NAME!r}")
    version = doc.get("version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        said = f"{repr(version)[:24]} (a JSON {_json_type(version)})" if "version" in doc else "missing"
        reads = f"this reader reads container version {FORMAT_VERSION}, an integer"
        raise ContainerError(episode, f"footer field 'version' is {said}: {reads}")
    return doc
