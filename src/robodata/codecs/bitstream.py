"""What a compressed video packet is, read from its headers alone (no decode).

A stream copy keeps a source's packets as they are; whether a packet is a random-access point,
a reference picture, and whether it carries its parameter sets is read here from the bitstream
itself, never taken from a container's flags (which may lie):

- H.264 / HEVC, Annex B (start codes: MCAP CompressedVideo, our own encoder) or length-prefixed
  (mp4 / mkv, the NAL length size from the avcC / hvcC extradata): NAL unit headers. A keyframe
  is an IDR (H.264), an IRAP (HEVC); parameter sets are SPS + PPS (+ VPS).
- AV1 (low-overhead OBUs, every OBU with a size field): OBU headers and the first bits of each
  frame header. A keyframe is a shown KEY_FRAME; parameter sets are a sequence header.

A length prefix or an OBU size running past the packet's end is a truncated packet
(`BitstreamError`); an Annex B packet has no sizes, so its truncation shows only when decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from robodata.errors import CodecError

H264_IDR, H264_SPS, H264_PPS = 5, 7, 8
HEVC_VPS, HEVC_SPS, HEVC_PPS = 32, 33, 34
HEVC_IRAP = range(16, 22)  # BLA, IDR, CRA
HEVC_RASL = (8, 9)  # leading pictures that reference the GOP before their CRA
AV1_SEQ, AV1_TD, AV1_FRAME_HEADER, AV1_FRAME = 1, 2, 3, 6


class BitstreamError(CodecError):
    """A packet does not parse as its codec's bitstream (truncated, or not that codec)."""


@dataclass(frozen=True)
class PacketScan:
    """What one packet holds, by its headers."""

    key: bool  # a random-access point: decoding may start here
    ref: bool  # other pictures may reference it (False: droppable)
    params: bool  # carries the parameter sets a decoder needs to start
    pictures: int  # coded pictures (VCL NAL units of the first slice / frame headers)
    open_gop: bool = False  # HEVC RASL pictures: they reference the GOP before their keyframe


def _annexb(data: bytes) -> Iterator[bytes]:
    """NAL units of an Annex B packet (start codes 00 00 01 / 00 00 00 01), without start codes."""
    starts = []
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = data.find(b"\x00\x00\x01", i + 3)
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(data)
        nal = data[s:end]
        yield nal.rstrip(b"\x00") if k + 1 < len(starts) else nal  # 00 of the next 4-byte start code


def _annexb_heads(data: bytes) -> Iterator[int]:
    """The header byte of each NAL unit of an Annex B packet, found lazily (start code by start code)."""
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        s = i + 3
        if s >= len(data) or data.startswith((b"\x00\x00\x01", b"\x00\x00\x00\x01"), s):
            raise BitstreamError("an empty NAL unit")
        yield data[s]
        i = data.find(b"\x00\x00\x01", s)


def _length_prefixed(data: bytes, size: int) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        if i + size > len(data):
            raise BitstreamError(f"a NAL length prefix is cut off at byte {i} of {len(data)}")
        n = int.from_bytes(data[i : i + size], "big")
        i += size
        if n == 0 or i + n > len(data):
            raise BitstreamError(f"a NAL unit of {n} bytes at byte {i} runs past the packet's {len(data)} bytes")
        yield data[i : i + n]
        i += n


def _leb128(data: bytes, i: int) -> tuple[int, int]:
    value = 0
    for k in range(8):
        if i >= len(data):
            raise BitstreamError("an OBU size is cut off")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << (7 * k)
        if not b & 0x80:
            return value, i
    raise BitstreamError("an OBU size is longer than 8 bytes")


def nal_length_size(codec: str, extradata: bytes) -> int:
    """The NAL length size of length-prefixed packets (avcC / hvcC extradata); 0 for Annex B."""
    if codec == "h264" and len(extradata) >= 7 and extradata[0] == 1:
        return (extradata[4] & 3) + 1
    if codec == "hevc" and len(extradata) >= 23 and extradata[0] == 1:
        return (extradata[21] & 3) + 1
    return 0


def _av1_config_obus(extradata: bytes) -> bytes:
    """The configOBUs of an av1C record (4-byte header, marker bit set), or raw OBUs as given."""
    return extradata[4:] if len(extradata) >= 4 and extradata[0] & 0x80 else extradata


class Scanner:
    """Reads packets of one stream of `codec` whose decoder gets `extradata`."""

    def __init__(self, codec: str, extradata: bytes = b""):
        if codec not in ("h264", "hevc", "av1"):
            raise BitstreamError(f"no bitstream reader for codec {codec!r}")
        self.codec = codec
        self.nal_size = nal_length_size(codec, extradata)
        self.reduced_still = False
        self.extradata_params = self._extradata_params(extradata)

    def _extradata_params(self, extradata: bytes) -> bool:
        if not extradata:
            return False
        if self.codec == "av1":
            return self.scan(_av1_config_obus(extradata), allow_empty=True).params
        if self.nal_size:  # avcC / hvcC: the record names its parameter sets
            return (extradata[5] & 0x1F) > 0 if self.codec == "h264" else extradata[22] >= 3
        return self.scan(extradata, allow_empty=True).params

    def scan(self, data: bytes, allow_empty: bool = False) -> PacketScan:
        """What `data` (one packet) holds. BitstreamError when it does not parse, or holds no
        picture (unless `allow_empty`: parameter sets alone)."""
        out = self._av1(data) if self.codec == "av1" else self._nals(data)
        if out.pictures == 0 and not allow_empty:
            raise BitstreamError(f"a packet of {len(data)} bytes holds no coded picture")
        return out

    def _nals(self, data: bytes) -> PacketScan:
        # Annex B: NAL headers up to the first slice (an access unit's parameter sets come before
        # its slices, and every slice of a picture has its type), never a search through slice data
        annexb = not self.nal_size
        heads = _annexb_heads(data) if annexb else (nal[0] for nal in _length_prefixed(data, self.nal_size))
        h264 = self.codec == "h264"
        key = open_gop = False
        ref, pictures, seen = True, 0, set()
        for head in heads:
            typ = head & 0x1F if h264 else (head >> 1) & 0x3F
            seen.add(typ)
            vcl = 1 <= typ <= 5 if h264 else typ < 32
            if not vcl:
                continue
            if pictures == 0:  # the first slice decides the picture's type
                if h264:
                    key, ref = typ == H264_IDR, (head >> 5) & 3 != 0
                else:
                    key, ref = typ in HEVC_IRAP, not (typ <= 14 and typ % 2 == 0)
            open_gop = open_gop or (not h264 and typ in HEVC_RASL)
            pictures += 1
            if annexb:
                break
        need = {H264_SPS, H264_PPS} if h264 else {HEVC_VPS, HEVC_SPS, HEVC_PPS}
        return PacketScan(key, ref, need <= seen, pictures, open_gop)

    def _av1(self, data: bytes) -> PacketScan:
        # OBU headers, each with its size (the low-overhead format); runs on every packet of a stream
        key = params = False
        frames, i, end = 0, 0, len(data)
        while i < end:
            head = data[i]
            if head & 0x80:
                raise BitstreamError(f"OBU at byte {i}: forbidden bit set (not AV1)")
            typ = (head >> 3) & 0xF
            i += 2 if head & 0x4 else 1
            if not head & 0x2:
                raise BitstreamError(f"OBU at byte {i}: no size field (not the low-overhead format)")
            if i < end and data[i] < 0x80:  # a one-byte size, the usual case
                n, i = data[i], i + 1
            else:
                n, i = _leb128(data, i)
            if i + n > end:
                raise BitstreamError(f"an OBU of {n} bytes at byte {i} runs past the packet's {end} bytes")
            if typ == AV1_SEQ:
                params = True
                if n >= 1:
                    self.reduced_still = bool(data[i] & 0x08)  # seq_profile(3) still_picture(1) reduced(1)
            elif typ in (AV1_FRAME, AV1_FRAME_HEADER):
                if frames == 0 and n:
                    if self.reduced_still:
                        key = True
                    else:
                        b = data[i]
                        show_existing, frame_type, show = b >> 7, (b >> 5) & 3, (b >> 4) & 1
                        key = not show_existing and frame_type == 0 and bool(show)
                frames += 1
            i += n
        return PacketScan(key, True, params, frames)


def annexb_parameter_sets(codec: str, data: bytes) -> bytes:
    """The parameter-set NAL units of an Annex B packet (SPS, PPS; HEVC's VPS too), each behind a
    4-byte start code: extradata for a stream that carries them in band (FFmpeg's H.264 / HEVC
    decoders take Annex B extradata)."""
    h264 = codec == "h264"
    keep = {H264_SPS, H264_PPS} if h264 else {HEVC_VPS, HEVC_SPS, HEVC_PPS}
    out = b""
    for nal in _annexb(data):
        if nal and (nal[0] & 0x1F if h264 else (nal[0] >> 1) & 0x3F) in keep:
            out += b"\x00\x00\x00\x01" + nal
    return out
