"""A container's stored video packets as samples Rerun's VideoStream can play, without re-encoding.

Rerun wants one frame per sample, Annex B (H.264/HEVC) or low-overhead OBUs (AV1), parameter sets
in every keyframe, and no B-frames (its samples have one timestamp, no decode order). The
container keeps parameter sets once (the codec's extradata) and packets as the encoder gave them:

- Annex B packets: the extradata's parameter sets are put in front of each keyframe (a re-mux);
- length-prefixed packets (avcC / hvcC extradata): rewritten to Annex B (a re-mux);
- AV1: the av1C sequence header OBU goes into each keyframe lacking one (after a temporal delimiter);
- packets out of presentation order (B-frames): not playable as stored; the caller re-encodes
  that part (robodata.viz.reencode) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

START = b"\x00\x00\x00\x01"


@dataclass
class Samples:
    """One part's frames as Rerun samples, in presentation order."""

    t_ns: np.ndarray  # int64, episode timeline
    pts: np.ndarray  # int64, the container's pts
    key: np.ndarray  # bool
    data: pa.Array  # binary, one sample per frame


def is_annexb(data: bytes) -> bool:
    return data.startswith(b"\x00\x00\x01") or data.startswith(START)


def in_presentation_order(packets: pa.Table) -> bool:
    """Stored (decode) order equals pts order: no frame is decoded before one shown earlier."""
    pts = packets.column("pts").to_numpy()
    return bool(np.all(np.diff(pts) > 0))


def _length_prefixed_to_annexb(data: bytes, size: int) -> bytes:
    out, i = bytearray(), 0
    while i + size <= len(data):
        n = int.from_bytes(data[i : i + size], "big")
        i += size
        out += START + data[i : i + n]
        i += n
    if i != len(data):
        raise ValueError("length-prefixed packet does not parse")
    return bytes(out)


def _nals(extra: bytes, i: int, n: int) -> tuple[bytes, int]:
    """`n` NAL units with 2-byte lengths from offset `i` of a decoder configuration record, as
    Annex B, and the offset after them."""
    out = bytearray()
    for _ in range(n):
        ln = int.from_bytes(extra[i : i + 2], "big")
        out += START + extra[i + 2 : i + 2 + ln]
        i += 2 + ln
    return bytes(out), i


def _avcc(extra: bytes) -> tuple[int, bytes]:
    """(NAL length size, Annex B SPS+PPS) from an avcC record."""
    sps, i = _nals(extra, 6, extra[5] & 0x1F)
    pps, _ = _nals(extra, i + 1, extra[i])
    return (extra[4] & 3) + 1, sps + pps


def _hvcc(extra: bytes) -> tuple[int, bytes]:
    """(NAL length size, Annex B VPS+SPS+PPS) from an hvcC record."""
    out, i = b"", 23
    for _ in range(extra[22]):
        nals, i = _nals(extra, i + 3, int.from_bytes(extra[i + 1 : i + 3], "big"))
        out += nals
    return (extra[21] & 3) + 1, out


def _obus(data: bytes) -> list[tuple[int, int, int]]:
    """(type, start, end) of each OBU of a low-overhead AV1 bitstream (obu_has_size_field set)."""
    out, i = [], 0
    while i < len(data):
        head = data[i]
        start, typ = i, (head >> 3) & 0xF
        i += 2 if head & 0x4 else 1
        if not head & 0x2:
            out.append((typ, start, len(data)))
            break
        n, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        i += n
        out.append((typ, start, i))
    return out


class SampleMuxer:
    """Turns one camera's stored packets into Rerun samples (see the module docstring).

    Args:
        codec: the container's codec name (h264 | hevc | av1).
        extradata: the stream's codec parameter sets (EpisodeReader.codec_extradata).
    """

    def __init__(self, codec: str, extradata: bytes):
        self.codec = codec
        self._prefix = b""
        self._nal_size = 0
        self._seq_header = b""
        if codec == "av1":
            obus = _obus(extradata[4:]) if len(extradata) > 4 and extradata[0] == 0x81 else _obus(extradata)
            body = extradata[4:] if len(extradata) > 4 and extradata[0] == 0x81 else extradata
            self._seq_header = b"".join(body[s:e] for t, s, e in obus if t == 1)
        elif extradata and not is_annexb(extradata):
            self._nal_size, self._prefix = _avcc(extradata) if codec == "h264" else _hvcc(extradata)
        else:
            self._prefix = extradata

    @property
    def has_lengths(self) -> bool:
        """Packets are length-prefixed NAL units (re-muxed to Annex B)."""
        return bool(self._nal_size)

    def samples(self, packets: pa.Table) -> Samples:
        """The part's packets (a verified packet table, stored in presentation order) as samples."""
        key = packets.column("key").to_numpy(zero_copy_only=False).astype(bool)
        data = packets.column("data").combine_chunks().cast(pa.binary())
        if self.codec == "av1" or self._nal_size:
            raw = data.to_pylist()
            out = pa.array([self._sample(b, bool(k)) for b, k in zip(raw, key, strict=True)], pa.binary())
        elif self._prefix:  # Annex B: parameter sets in front of each keyframe, in Arrow (no per-frame Python)
            prefix = pa.array(np.where(key, self._prefix, b"").tolist(), pa.binary())
            out = pc.binary_join_element_wise(prefix, data, pa.scalar(b"", pa.binary()))
        else:
            out = data
        return Samples(packets.column("t_ns").to_numpy(), packets.column("pts").to_numpy(), key, out)

    def _sample(self, data: bytes, key: bool) -> bytes:
        if self.codec == "av1":
            if not key or not self._seq_header:
                return data
            obus = _obus(data)
            if any(t == 1 for t, _, _ in obus):
                return data
            cut = obus[0][2] if obus and obus[0][0] == 2 else 0  # after a temporal delimiter
            return data[:cut] + self._seq_header + data[cut:]
        if self._nal_size:
            data = _length_prefixed_to_annexb(data, self._nal_size)
        return self._prefix + data if key else data
