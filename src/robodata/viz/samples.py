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

from robodata.viz.paramsets import length_prefixed_to_annexb, obus, parse_extradata


@dataclass
class Samples:
    """One part's frames as Rerun samples, in presentation order."""

    t_ns: np.ndarray  # int64, episode timeline
    pts: np.ndarray  # int64, the container's pts
    key: np.ndarray  # bool
    data: pa.Array  # binary, one sample per frame


def in_presentation_order(packets: pa.Table) -> bool:
    """Stored (decode) order equals pts order: no frame is decoded before one shown earlier."""
    pts = packets.column("pts").to_numpy()
    return bool(np.all(np.diff(pts) > 0))


class SampleMuxer:
    """Turns one camera's stored packets into Rerun samples (see the module docstring).

    Args:
        codec: the container's codec name (h264 | hevc | av1).
        extradata: the stream's codec parameter sets (EpisodeReader.codec_extradata).
    """

    def __init__(self, codec: str, extradata: bytes):
        self.codec = codec
        sets = parse_extradata(codec, extradata)
        self._prefix = sets.prefix
        self._nal_size = sets.nal_size
        self._seq_header = sets.seq_header

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
            units = obus(data, "packet")
            if any(t == 1 for t, _, _ in units):
                return data
            cut = units[0][2] if units and units[0][0] == 2 else 0  # after a temporal delimiter
            return data[:cut] + self._seq_header + data[cut:]
        if self._nal_size:
            data = length_prefixed_to_annexb(data, self._nal_size)
        return self._prefix + data if key else data
