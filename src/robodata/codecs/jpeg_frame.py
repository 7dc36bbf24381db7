"""A JPEG's structure read before it is decoded: its frame header (size, components, coding) and
whether its segments are whole, so that a decoder never conceals what the bytes do not hold.

A JPEG is SOI, marker segments (each with its declared length), a frame header (SOFn), one or
more scans (SOS then entropy-coded data), EOI. `frame_of` walks the segments up to the first
scan, checks every declared length against the bytes present and returns the frame header;
`pixels` lets a caller refuse a frame far larger than its bytes could hold before any decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from robodata.errors import CodecError

SOI, EOI = b"\xff\xd8", b"\xff\xd9"
# SOF markers libavcodec's mjpeg decoder reads (baseline, extended, progressive Huffman): its
# refusal of one is final, no other decoder may conceal the damage it found
NATIVE_SOF = (0xC0, 0xC1, 0xC2)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # DHT, JPG, DAC are not frame headers
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}  # RSTn, TEM: no length field


class JpegStructureError(CodecError):
    """The bytes say they are a JPEG but their structure is broken (the message names how)."""


@dataclass(frozen=True)
class JpegFrame:
    sof: int  # the SOFn marker's second byte (0xC0 baseline ...)
    height: int
    width: int
    components: int

    @property
    def native(self) -> bool:
        """libavcodec decodes this coding (its verdict on the bytes is final)."""
        return self.sof in NATIVE_SOF

    @property
    def pixels(self) -> int:
        return self.height * self.width


def is_jpeg(data: bytes) -> bool:
    return data[:2] == SOI


def trimmed(data: bytes) -> bytes:
    """A JPEG stored in a zero-padded row (ALOHA without `compress_len`): the bytes up to its EOI."""
    if data[-2:] == EOI:
        return data
    stripped = data.rstrip(b"\0")
    return stripped if stripped[-2:] == EOI else data


def frame_of(data: bytes) -> JpegFrame:
    """The frame header of a whole JPEG (starts with SOI, ends with EOI, every segment before the
    first scan within the bytes), or JpegStructureError saying what is broken."""
    if not is_jpeg(data):
        raise JpegStructureError("no JPEG start marker")
    if data[-2:] != EOI:
        raise JpegStructureError(f"no JPEG end marker (cut short? {len(data)} bytes end in {data[-2:].hex()})")
    pos, frame = 2, None
    while True:
        if pos + 4 > len(data) or data[pos] != 0xFF:
            raise JpegStructureError(f"no marker at byte {pos} of {len(data)} (a segment's length is wrong)")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker in (0xD8, 0xD9):
            raise JpegStructureError(f"marker 0x{marker:02X} at byte {pos}, before any scan")
        length = (data[pos + 2] << 8) | data[pos + 3]  # ~10 segments a frame: plain indexing, no struct
        end = pos + 2 + length
        if length < 2 or end > len(data) - 2:
            raise JpegStructureError(f"segment 0x{marker:02X} at byte {pos} declares {length} bytes, past the end")
        if marker in _SOF:
            if length < 8:
                raise JpegStructureError(f"frame header declares {length} bytes")
            h, w = (data[pos + 5] << 8) | data[pos + 6], (data[pos + 7] << 8) | data[pos + 8]
            frame = JpegFrame(marker, h, w, data[pos + 9])
            if h == 0 or w == 0 or frame.components == 0:
                raise JpegStructureError(f"frame header declares {w}x{h} with {frame.components} components")
        if marker == 0xDA:  # SOS: entropy-coded data follows
            if frame is None:
                raise JpegStructureError("a scan before any frame header")
            if end >= len(data) - 2:
                raise JpegStructureError("a scan with no entropy-coded data")
            return frame
        pos = end
