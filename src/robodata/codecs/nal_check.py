"""Structural checks of H.264 / HEVC access units, from NAL unit and slice headers (no decode).

A stream copy decodes a sample of GOPs (robodata.ingest.copy_verify); the packets of the GOPs it
does not decode are held to what their headers must say, every NAL unit of every packet read:
- the byte stream: nothing but zero bytes before the first start code, no empty NAL unit, no NAL
  unit that is its header alone where the type has a payload (a slice, a parameter set);
- each NAL unit header: forbidden_zero_bit 0; a type the decoder knows (H.264 1..15, 19, 20; HEVC
  not a reserved or unspecified one); nal_ref_idc non-zero on IDR slices and parameter sets, zero
  on SEI, access unit delimiters, end of sequence / stream and filler (H.264); nuh_temporal_id_plus1
  non-zero, and 0 + 1 on IRAP pictures, VPS and SPS (HEVC);
- parameter sets: their ids in range, a PPS naming an SPS the stream has, every slice naming a PPS
  the stream has (the extradata, or in band before it); a keyframe that carries none relies on the
  extradata's, so the ones in effect must be the extradata's (else its GOP does not decode alone,
  as a reader decodes it);
- slice headers: slice_type in range and intra on an IDR picture (H.264); one picture a packet,
  its slices in order (the first at macroblock 0 / first_slice_segment_in_pic_flag, then
  increasing, never a second first slice: FFmpeg has no arbitrary slice order), all of one kind
  (IDR or not, reference or not; HEVC: one nal_unit_type).
What this cannot see: a slice cut short inside its slice data (Annex B has no sizes), or bytes
changed there; a decode of its GOP is the only check for that.
"""

from __future__ import annotations

import re

from robodata.codecs.bitstream import HEVC_RASL, BitstreamError, PacketScan

_H264_TYPES = frozenset(range(1, 16)) | {19, 20}
_H264_REF = frozenset((5, 7, 8))  # nal_ref_idc != 0
_H264_NOREF = frozenset((6, 9, 10, 11, 12))  # nal_ref_idc == 0
_H264_PAYLOAD = frozenset((7, 8))  # a NAL unit of its header alone is cut short (slices: below)
_START = re.compile(b"\x00\x00\x01")
_HEVC_VCL = frozenset(range(0, 10)) | frozenset(range(16, 22))
_HEVC_TYPES = _HEVC_VCL | frozenset(range(32, 41))
# bytes of a NAL unit read for its headers: a slice's first three fields (first_mb_in_slice,
# slice_type, the PPS id: at most 67 bits) / a PPS's two ids; an HEVC SPS's profile_tier_level
_HEAD, _HEAD_SPS = 12, 160


def nal_spans(data: bytes, nal_size: int) -> list[tuple[int, int]]:
    """(start, end) of each NAL unit of a packet, header included: Annex B (nal_size 0; trailing zero
    bytes are the next start code's or trailing_zero_8bits) or length-prefixed."""
    spans: list[tuple[int, int]] = []
    if nal_size:
        i, end = 0, len(data)
        while i < end:
            if i + nal_size > end:
                raise BitstreamError(f"a NAL length prefix is cut off at byte {i} of {end}")
            n = int.from_bytes(data[i : i + nal_size], "big")
            i += nal_size
            if n == 0 or i + n > end:
                raise BitstreamError(f"a NAL unit of {n} bytes at byte {i} runs past the packet's {end} bytes")
            spans.append((i, i + n))
            i += n
        return spans
    starts = [m.end() for m in _START.finditer(data)]  # a regular expression finds them faster than find
    if not starts or data[: starts[0] - 3].strip(b"\x00"):
        raise BitstreamError("bytes before the first start code are no NAL unit" if starts else "no start code")
    for s, nxt in zip(starts, starts[1:] + [len(data) + 3], strict=True):
        e = nxt - 3
        while e > s and data[e - 1] == 0:
            e -= 1
        if e == s:
            raise BitstreamError(f"an empty NAL unit at byte {s}")
        spans.append((s, e))
    return spans


class NalStream:
    """One H.264 / HEVC stream's packets checked in decode order; `extradata`: avcC / hvcC
    (`nal_size` > 0) or Annex B parameter sets, the ones a decoder of one GOP alone starts from."""

    def __init__(self, codec: str, extradata: bytes, nal_size: int):
        self.h264 = codec == "h264"
        self.nal_size = nal_size
        self.sets: dict[tuple[str, int], bytes] = {}  # parameter sets in effect, by (kind, id)
        self.pps_sps: dict[int, int] = {}  # PPS id -> its SPS id
        self._memo: dict[bytes, list[int]] = {}  # H.264 slice header prefix -> its first three fields
        # a parameter set NAL unit read before -> its key (and a PPS's SPS id)
        self._sets_seen: dict[bytes, tuple[tuple[str, int], int]] = {}
        for s, e in _extradata_spans(codec, extradata, nal_size):
            if self._nal(extradata, s, e, "the extradata", set()) is not None:
                raise BitstreamError("the extradata holds a slice")
        self.base = dict(self.sets)  # the extradata's own

    def check(self, data: bytes) -> PacketScan:
        """What `data` (one packet: one access unit) holds, as robodata.codecs.bitstream.Scanner.scan
        reads it; BitstreamError naming what is wrong with it."""
        where = "the access unit"
        pic: tuple | None = None  # the picture's (keyframe, reference, NAL type) from its first slice
        last_mb = -1
        carried: set[tuple[str, int]] = set()  # parameter sets the packet itself sends
        for s, e in nal_spans(data, self.nal_size):
            got = self._nal(data, s, e, where, carried)
            if got is None:
                continue
            kind, first, first_mb, pps = got
            if pic is None:
                if not first:
                    raise BitstreamError(f"{where}: its first slice does not open the picture (slices out of order)")
                pic = kind
                self._active(pps, kind[0], carried, where)
            elif first:
                raise BitstreamError(f"{where}: holds a second picture (one packet is one frame)")
            elif kind != pic:
                raise BitstreamError(f"{where}: slices of one picture differ in NAL type / reference ({pic}, {kind})")
            elif 0 <= first_mb <= last_mb:
                raise BitstreamError(f"{where}: slices out of order (first_mb_in_slice {first_mb} after {last_mb})")
            elif ("pps", pps) not in self.sets:
                raise BitstreamError(f"{where}: a slice names PPS {pps}, which the stream has not sent")
            last_mb = first_mb
        if pic is None:
            raise BitstreamError(f"a packet of {len(data)} bytes holds no coded picture")
        key, ref, typ = pic
        params = {k for k, _ in carried} >= ({"sps", "pps"} if self.h264 else {"vps", "sps", "pps"})
        return PacketScan(key, ref, params, 1, not self.h264 and typ in HEVC_RASL)

    def _active(self, pps: int, key: bool, carried: set, where: str) -> None:
        """The picture's PPS and SPS are known; a keyframe's are the extradata's unless it carries them."""
        sps = self.pps_sps.get(pps)
        if sps is None or ("pps", pps) not in self.sets:
            raise BitstreamError(
                f"{where}: a slice names PPS {pps}, which the stream has not sent (extradata, in band)"
            )
        if key:  # a keyframe: its GOP is decoded alone from the extradata plus what it carries
            for k in (("pps", pps), ("sps", sps)):
                if k not in carried and self.sets.get(k) != self.base.get(k):
                    raise BitstreamError(
                        f"{where}: the keyframe relies on {k[0].upper()} {k[1]} sent earlier in band, "
                        "not the extradata's: its GOP does not decode alone"
                    )

    def _nal(self, data: bytes, s: int, e: int, where: str, carried: set) -> tuple | None:
        """Checks one NAL unit's header; a parameter set is recorded, a slice's (kind, opens the
        picture, first_mb_in_slice, PPS id) returned."""
        head = data[s]
        if head & 0x80:
            raise BitstreamError(f"{where}: a NAL unit at byte {s} has its forbidden_zero_bit set")
        if self.h264:
            typ, ref = head & 0x1F, head >> 5
            if typ == 1 or typ == 5:  # the common case first: a slice
                if e - s <= 1:
                    raise BitstreamError(f"{where}: a slice NAL unit (type {typ}) holds its header alone")
                if typ == 5 and not ref:
                    raise BitstreamError(f"{where}: an IDR slice with nal_ref_idc 0")
                memo, fields = self._memo, None
                for k in (2, 3, 4, 5):  # the fewest bytes that hold the slice's first three fields decide them
                    fields = memo.get(data[s + 1 : s + k])
                    if fields is not None:
                        break
                if fields is None:
                    fields = _ues(data[s + 1 : min(e, s + 1 + _HEAD)], 0, 3, where)
                    prefix = data[s + 1 : s + 1 + (fields[3] + 7) // 8]
                    if fields[3] <= 32 and b"\x00\x00" not in data[s + 1 : s + 6]:  # no emulation prevention near
                        memo[prefix] = fields
                first_mb, slice_type, pps = fields[:3]
                if slice_type > 9 or (typ == 5 and slice_type % 5 not in (2, 4)) or pps > 255:
                    raise BitstreamError(f"{where}: a slice of NAL type {typ} with slice_type {slice_type}, PPS {pps}")
                return (typ == 5, ref != 0, typ), first_mb == 0, first_mb, pps
            if typ not in _H264_TYPES:
                raise BitstreamError(f"{where}: NAL unit type {typ} is not one an H.264 decoder reads")
            if (typ in _H264_REF and not ref) or (typ in _H264_NOREF and ref):
                raise BitstreamError(f"{where}: NAL unit type {typ} with nal_ref_idc {ref}")
            if typ in _H264_PAYLOAD and e - s <= 1:
                raise BitstreamError(f"{where}: a NAL unit of type {typ} holds its header alone")
            hl, sps_t, pps_t = 1, 7, 8
        else:
            if e - s < 3:
                raise BitstreamError(f"{where}: a NAL unit at byte {s} is cut off inside its header")
            typ, tid = (head >> 1) & 0x3F, data[s + 1] & 7
            if typ not in _HEVC_TYPES:
                raise BitstreamError(f"{where}: NAL unit type {typ} is not one an HEVC decoder reads")
            if tid == 0 or (tid != 1 and (16 <= typ <= 23 or 32 <= typ <= 33)):
                raise BitstreamError(f"{where}: NAL unit type {typ} with nuh_temporal_id_plus1 {tid}")
            if typ in _HEVC_VCL:
                irap = 16 <= typ <= 21
                b = data[s + 2 : min(e, s + 2 + _HEAD)]
                pps = _ues(b, 1 + irap, 1, where)[0]  # first_slice_segment_in_pic_flag [no_output_of_prior_pics_flag]
                if pps > 63:
                    raise BitstreamError(f"{where}: a slice names PPS {pps} (over 63)")
                kind = (irap, not (typ <= 14 and typ % 2 == 0), typ)  # sub-layer non-reference: even types
                return kind, bool(b[0] & 0x80), -1, pps  # slice_segment_address: not read (needs the SPS's size)
            hl, sps_t, pps_t = 2, 33, 34
        unit = data[s:e]
        seen = self._sets_seen.get(unit)  # a parameter set sent again as it was (every keyframe's, as a rule)
        if seen is not None and (seen[0][0] != "pps" or ("sps", seen[1]) in self.sets):
            key = seen[0]
            if key[0] == "pps":
                self.pps_sps[key[1]] = seen[1]
            self.sets[key] = unit
            carried.add(key)
            return None
        if typ == sps_t:
            key = ("sps", self._sps_id(data[s + hl : min(e, s + hl + _HEAD_SPS)], where))
        elif typ == pps_t:
            pps, sps = _ues(data[s + hl : min(e, s + hl + _HEAD)], 0, 2, where)[:2]
            if pps > (255 if self.h264 else 63) or sps > (31 if self.h264 else 15):
                raise BitstreamError(f"{where}: PPS {pps} / its SPS id {sps} out of range")
            if ("sps", sps) not in self.sets:
                raise BitstreamError(f"{where}: PPS {pps} names SPS {sps}, which the stream has not sent")
            key, self.pps_sps[pps] = ("pps", pps), sps
            self._sets_seen[unit] = (key, sps)
        elif not self.h264 and typ == 32:
            key = ("vps", data[s + 2] >> 4)
        else:
            return None
        self.sets[key] = unit
        self._sets_seen.setdefault(unit, (key, -1))
        carried.add(key)
        return None

    def _sps_id(self, b: bytes, where: str) -> int:
        if self.h264:
            sps = _ues(b, 24, 1, where)[0]  # after profile_idc, constraint flags, level_idc
        else:  # after vps id (4), max_sub_layers_minus1 (3), nesting (1), general PTL (88 + 8)
            sub = (b[0] >> 1) & 7 if b else 0
            flags = int.from_bytes(b[13:15], "big") if sub else 0  # sub-layer profile / level present
            skip = 104 + (16 if sub else 0)
            for i in range(sub):
                skip += 88 * ((flags >> (15 - 2 * i)) & 1) + 8 * ((flags >> (14 - 2 * i)) & 1)
            sps = _ues(b, skip, 1, where)[0]
        if sps > (31 if self.h264 else 15):
            raise BitstreamError(f"{where}: SPS id {sps} out of range")
        return sps


def _ues(b: bytes, skip: int, count: int, where: str) -> list[int]:
    """`count` Exp-Golomb codes after `skip` bits of an RBSP prefix (emulation prevention removed),
    then the bits read."""
    if b"\x00\x00\x03" in b:
        b = b.replace(b"\x00\x00\x03", b"\x00\x00")
    left = total = 8 * len(b) - skip
    rest = int.from_bytes(b, "big") & ((1 << left) - 1)
    out = []
    for _ in range(count):
        n = rest.bit_length()
        width = 2 * (left - n) + 1  # leading zeros, the 1, as many bits again
        if not rest or width > left:
            raise BitstreamError(f"{where}: a header field is cut off or not an Exp-Golomb code")
        left -= width
        out.append((rest >> left) - 1)
        rest &= (1 << left) - 1
    out.append(total - left + skip)
    return out


def _extradata_spans(codec: str, extradata: bytes, nal_size: int) -> list[tuple[int, int]]:
    """The parameter-set NAL units of an avcC / hvcC record, or of Annex B extradata."""
    if not extradata:
        return []
    if not nal_size:
        return nal_spans(extradata, 0)
    out, d = [], extradata
    try:
        if codec == "h264":  # numOfSequenceParameterSets at byte 5, then the PPS count after them
            i = 6
            for count_at in (5, -1):
                count = d[5] & 0x1F if count_at == 5 else d[i]
                i += count_at < 0
                for _ in range(count):
                    n = int.from_bytes(d[i : i + 2], "big")
                    out.append((i + 2, i + 2 + n))
                    i += 2 + n
        else:
            i = 23
            for _ in range(d[22]):
                count = int.from_bytes(d[i + 1 : i + 3], "big")
                i += 3
                for _ in range(count):
                    n = int.from_bytes(d[i : i + 2], "big")
                    out.append((i + 2, i + 2 + n))
                    i += 2 + n
    except IndexError:
        raise BitstreamError("the avcC / hvcC record is cut off") from None
    if any(e > len(d) or e <= s for s, e in out):
        raise BitstreamError("a parameter set of the avcC / hvcC record runs past its end")
    return out


def h264_entropy(extradata: bytes) -> str:
    """The entropy coder of an H.264 stream from its extradata's PPS (avcC or Annex B):
    "cavlc" or "cabac" by entropy_coding_mode_flag (VideoSettings.entropy). BitstreamError when the
    extradata has no PPS or its PPSs disagree."""
    from robodata.codecs.bitstream import nal_length_size

    flags = set()
    for s, e in _extradata_spans("h264", extradata, nal_length_size("h264", extradata)):
        nal = extradata[s:e].replace(b"\x00\x00\x03", b"\x00\x00")
        if nal and nal[0] & 0x1F == 8:  # PPS: pic_parameter_set_id, seq_parameter_set_id, the flag
            at = _ues(nal[:_HEAD], 8, 2, "PPS")[-1]
            if at >= 8 * min(len(nal), _HEAD):
                raise BitstreamError("PPS: cut off before entropy_coding_mode_flag")
            flags.add((nal[at // 8] >> (7 - at % 8)) & 1)
    if len(flags) != 1:
        raise BitstreamError("no PPS in the extradata" if not flags else "PPSs of both entropy coders")
    return "cabac" if flags.pop() else "cavlc"
