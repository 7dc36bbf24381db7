"""A camera's codec extradata and packets as the viewer re-muxes them, parsed strictly.

The container keeps a stream's parameter sets once, as the encoder gave them: Annex B NAL units
(H.264/HEVC), a decoder configuration record (avcC / hvcC: length-prefixed packets follow), or
AV1 OBUs (an av1C record or bare OBUs). The reader hands them to libavcodec, which refuses what
does not parse; the viewer takes them apart itself, so every length and count here is checked
against the bytes there are, and anything that does not parse is a `CodecError` saying what and
where (never an IndexError from a lying length).
"""

from __future__ import annotations

from dataclasses import dataclass

from robodata.errors import CodecError

START = b"\x00\x00\x00\x01"
_PARAM_TYPES = {"h264": {7, 8}, "hevc": {32, 33, 34}}  # SPS+PPS; VPS+SPS+PPS


@dataclass(frozen=True)
class ParamSets:
    """What the viewer puts in front of each keyframe, and how packets are framed."""

    nal_size: int = 0  # bytes of each NAL length prefix in packets (0: Annex B or AV1)
    prefix: bytes = b""  # Annex B parameter sets (H.264/HEVC)
    seq_header: bytes = b""  # AV1 sequence header OBU(s)


def is_annexb(data: bytes) -> bool:
    return data.startswith(b"\x00\x00\x01") or data.startswith(START)


def parse_extradata(codec: str, extradata: bytes) -> ParamSets:
    """The parameter sets of a stream's extradata (empty extradata: none, packets carry them).

    Raises:
        CodecError: the extradata does not parse as `codec`'s (what is wrong, at which byte).
    """
    if not extradata:
        return ParamSets()
    if codec == "av1":
        body = extradata[4:] if extradata[0] == 0x81 else extradata  # av1C record, or bare OBUs
        if extradata[0] == 0x81 and len(extradata) < 4:
            raise CodecError(f"av1C record is {len(extradata)} bytes, shorter than its 4-byte header")
        return ParamSets(seq_header=b"".join(body[s:e] for t, s, e in obus(body, "extradata") if t == 1))
    if codec not in _PARAM_TYPES:
        raise CodecError(f"no parameter-set parser for codec {codec!r}")
    if is_annexb(extradata):
        annexb_nals(extradata, codec, "extradata")
        return ParamSets(prefix=extradata)
    nal_size, nals = avcc(extradata) if codec == "h264" else hvcc(extradata)
    types = {nal_type(codec, n) for n in nals}
    if not _PARAM_TYPES[codec] <= types:
        want = sorted(_PARAM_TYPES[codec])
        raise CodecError(f"{codec} configuration record holds NAL types {sorted(types)}, not {want}")
    return ParamSets(nal_size=nal_size, prefix=b"".join(START + n for n in nals))


def nal_type(codec: str, nal: bytes) -> int:
    return nal[0] & 0x1F if codec == "h264" else (nal[0] >> 1) & 0x3F


def annexb_nals(data: bytes, codec: str, what: str) -> list[bytes]:
    """The NAL units of an Annex B byte string (each non-empty, forbidden bit clear)."""
    if not is_annexb(data):
        raise CodecError(f"{what} does not start with an Annex B start code")
    out = []
    for piece in data.split(b"\x00\x00\x01")[1:]:
        nal = piece[:-1] if piece.endswith(b"\x00") else piece  # a 4-byte start code's leading zero
        if not nal or nal[0] & 0x80:
            raise CodecError(f"{what}: an Annex B NAL unit is empty or has its forbidden bit set")
        out.append(nal)
    return out


def _nals(extra: bytes, i: int, n: int, record: str) -> tuple[list[bytes], int]:
    """`n` NAL units with 2-byte lengths from offset `i` of a configuration record, and the
    offset after them."""
    out = []
    for k in range(n):
        if i + 2 > len(extra):
            raise CodecError(f"{record}: NAL unit {k + 1} of {n} starts at byte {i}, past its end ({len(extra)})")
        ln = int.from_bytes(extra[i : i + 2], "big")
        if ln == 0 or i + 2 + ln > len(extra):
            raise CodecError(f"{record}: NAL unit at byte {i} declares {ln} bytes, {len(extra) - i - 2} remain")
        out.append(extra[i + 2 : i + 2 + ln])
        i += 2 + ln
    return out, i


def avcc(extra: bytes) -> tuple[int, list[bytes]]:
    """(NAL length size, SPS and PPS NAL units) of an avcC record (ISO/IEC 14496-15)."""
    if len(extra) < 7 or extra[0] != 1:
        raise CodecError(f"avcC record must start with version 1 and be >= 7 bytes, got {extra[:8].hex()}")
    sps, i = _nals(extra, 6, extra[5] & 0x1F, "avcC")
    if i >= len(extra):
        raise CodecError("avcC record ends before its PPS count")
    pps, _ = _nals(extra, i + 1, extra[i], "avcC")
    return (extra[4] & 3) + 1, sps + pps  # trailing bytes: High-profile extensions


def hvcc(extra: bytes) -> tuple[int, list[bytes]]:
    """(NAL length size, NAL units of every array) of an hvcC record."""
    if len(extra) < 23 or extra[0] > 1:  # FFmpeg takes version 0 too (drafts of ISO/IEC 14496-15)
        raise CodecError(f"hvcC record must start with version 0 or 1 and be >= 23 bytes, got {extra[:4].hex()}...")
    out, i = [], 23
    for k in range(extra[22]):
        if i + 3 > len(extra):
            raise CodecError(f"hvcC array {k + 1} of {extra[22]} starts at byte {i}, past its end ({len(extra)})")
        nals, i = _nals(extra, i + 3, int.from_bytes(extra[i + 1 : i + 3], "big"), "hvcC")
        out += nals
    return (extra[21] & 3) + 1, out


def obus(data: bytes, what: str) -> list[tuple[int, int, int]]:
    """(type, start, end) of each OBU of a low-overhead AV1 bitstream; an OBU without a size
    field runs to the end."""
    out, i = [], 0
    while i < len(data):
        head, start = data[i], i
        if head & 0x80:
            raise CodecError(f"{what}: OBU at byte {i} has its forbidden bit set")
        i += 2 if head & 0x4 else 1
        if not head & 0x2:
            out.append(((head >> 3) & 0xF, start, len(data)))
            break
        n = 0
        for shift in range(0, 56, 7):
            if i >= len(data):
                raise CodecError(f"{what}: OBU at byte {start} is cut inside its size field")
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
        else:
            raise CodecError(f"{what}: OBU at byte {start} has a size field over 8 bytes")
        i += n
        if i > len(data):
            raise CodecError(f"{what}: OBU at byte {start} declares {n} bytes, past the end ({len(data)})")
        out.append(((head >> 3) & 0xF, start, i))
    return out


def length_prefixed_to_annexb(data: bytes, size: int) -> bytes:
    """A packet of `size`-byte length-prefixed NAL units as Annex B."""
    out, i = bytearray(), 0
    while i < len(data):
        if i + size > len(data):
            raise CodecError(f"length-prefixed packet is cut inside a length field at byte {i}")
        n = int.from_bytes(data[i : i + size], "big")
        i += size
        if i + n > len(data):
            left = len(data) - i
            raise CodecError(f"length-prefixed packet: NAL unit at byte {i - size} declares {n} bytes, {left} remain")
        out += START + data[i : i + n]
        i += n
    return bytes(out)
