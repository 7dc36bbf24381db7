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

from robodata.errors import ContainerError

MAGIC = b"RDEP"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sHH8x")
TRAILER = struct.Struct("<QQI4s")
FORMAT_NAME = "robodata.episode"


def checksum(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def pack_header() -> bytes:
    return HEADER.pack(MAGIC, FORMAT_VERSION, 0)


@dataclass(frozen=True)
class PartInfo:
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


def unpack_trailer(episode: str, raw: bytes, size: int) -> tuple[int, int, int]:
    if len(raw) != TRAILER.size:
        raise ContainerError(episode, f"file too short ({size} bytes) to be a robodata container")
    off, length, crc, magic = TRAILER.unpack(raw)
    if magic != MAGIC:
        raise ContainerError(
            episode, "no container trailer at end of file (truncated, still being written, or not a robodata container)"
        )
    if off + length + TRAILER.size != size:
        raise ContainerError(
            episode,
            f"trailer points to footer at {off}+{length}, inconsistent with size {size} (truncated or appended to)",
        )
    return off, length, crc


def decode_footer(episode: str, raw: bytes, crc: int | None) -> dict[str, Any]:
    if crc is not None and checksum(raw) != crc:
        raise ContainerError(episode, "footer checksum mismatch (corrupted index)")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContainerError(episode, f"footer is not valid JSON: {exc}") from None
    if doc.get("format") != FORMAT_NAME:
        raise ContainerError(episode, f"footer format {doc.get('format')!r} is not {FORMAT_NAME!r}")
    if doc.get("version") != FORMAT_VERSION:
        raise ContainerError(
            episode, f"container version {doc.get('version')} not supported (this reader: {FORMAT_VERSION})"
        )
    return doc
