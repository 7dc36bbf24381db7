"""Issue 40: the structural checks an undecoded GOP of an H.264 / HEVC stream copy is held to
(robodata.codecs.nal_check), on access units built bit by bit from the specs' syntax."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from robodata.codecs.bitstream import BitstreamError, Scanner, annexb_parameter_sets, nal_length_size
from robodata.codecs.nal_check import NalStream, h264_entropy


def ue(v: int) -> str:
    b = bin(v + 1)[2:]
    return "0" * (len(b) - 1) + b


def nal(head: bytes, bits: str, prefix: bytes = b"\x00\x00\x00\x01") -> bytes:
    bits += "1"  # rbsp_stop_one_bit
    bits += "0" * (-len(bits) % 8)
    return prefix + head + int(bits, 2).to_bytes(len(bits) // 8, "big")


SPS = nal(b"\x67", "01000010" + "0" * 8 + "00011110" + ue(0) + "1011")  # Baseline, level 3, id 0
PPS = nal(b"\x68", ue(0) + ue(0) + "0110")
PPS_OTHER = nal(b"\x68", ue(0) + ue(0) + "1110")  # PPS 0 again, other contents


def slice_(first_mb: int = 0, slice_type: int = 7, pps: int = 0, head: int = 0x65) -> bytes:
    return nal(bytes([head]), ue(first_mb) + ue(slice_type) + ue(pps) + "1100101011110000")


IDR, P = slice_(), slice_(slice_type=5, head=0x41)


def _check(extradata: bytes, *units: bytes) -> list:
    s = NalStream("h264", extradata, 0)
    return [s.check(u) for u in units]


def _refused(extradata: bytes, *units: bytes) -> str:
    with pytest.raises(BitstreamError) as e:
        _check(extradata, *units)
    return str(e.value)


def test_a_sound_h264_stream_reads_as_its_headers_say():
    scans = _check(b"", SPS + PPS + IDR, P, SPS + PPS + slice_() + slice_(40))
    assert [(s.key, s.ref, s.params) for s in scans] == [(True, True, True), (False, True, False), (True, True, True)]
    assert _check(SPS + PPS, IDR, P)[0].key  # parameter sets from the extradata alone


@pytest.mark.parametrize(
    ("units", "why"),
    [
        ((SPS + PPS + nal(b"\x05", ue(0) + ue(7) + ue(0) + "11"),), "IDR slice with nal_ref_idc 0"),
        ((SPS + PPS + slice_(slice_type=5),), "slice_type 5"),  # an IDR picture of P slices
        ((SPS + PPS + slice_(pps=3),), "names PPS 3, which the stream has not sent"),
        ((nal(b"\x68", ue(0) + ue(2)) + IDR,), "names SPS 2"),
        ((SPS + PPS + slice_(4),), "does not open the picture"),
        ((SPS + PPS + slice_() + slice_(50) + slice_(20),), "slices out of order"),
        ((SPS + PPS + IDR + IDR,), "second picture"),
        ((SPS + PPS + slice_() + slice_(9, slice_type=2, head=0x61),), "differ in NAL type"),  # IDR, then non-IDR
        ((SPS + PPS + nal(b"\x66", "0000010100000001") + IDR,), "type 6 with nal_ref_idc 3"),  # an SEI
        ((SPS + b"\x00\x00\x01\x68" + IDR,), "holds its header alone"),  # a PPS of its header alone
        ((SPS + PPS,), "holds no coded picture"),
        ((SPS + PPS + IDR, b"\x00\x00\x00\x01\x41\x01"), "cut off or not an Exp-Golomb code"),
    ],
)  # fmt: skip
def test_headers_that_lie_are_refused(units, why):
    assert why in _refused(b"", *units)


def test_a_keyframe_without_parameter_sets_decodes_alone_from_the_extradata_only():
    assert _check(SPS + PPS, SPS + PPS + IDR, P, IDR, P)  # the in-band ones are the extradata's
    why = _refused(SPS + PPS, SPS + PPS_OTHER + IDR, P, IDR, P)  # PPS 0 changed in band, then relied on
    assert "relies on PPS 0 sent earlier in band" in why


def test_avcc_extradata_and_length_prefixed_packets():
    sps, pps = SPS[4:], PPS[4:]
    avcc = bytes([1, 66, 0, 30, 0xFF, 0xE1]) + len(sps).to_bytes(2, "big") + sps
    avcc += bytes([1]) + len(pps).to_bytes(2, "big") + pps

    def framed(*nals: bytes) -> bytes:
        return b"".join(len(n[4:]).to_bytes(4, "big") + n[4:] for n in nals)

    s = NalStream("h264", avcc, 4)
    assert s.check(framed(IDR)).key and not s.check(framed(P)).key
    with pytest.raises(BitstreamError, match="runs past"):
        NalStream("h264", avcc[:-2], 4)
    with pytest.raises(BitstreamError, match="names PPS 1"):
        NalStream("h264", avcc, 4).check(framed(slice_(pps=1)))


def _hevc(typ: int, bits: str, tid: int = 1) -> bytes:
    return nal(bytes([typ << 1, tid]), bits)


HEVC_PS = (
    _hevc(32, "0000" + "1" * 12)
    + _hevc(33, "0000" + "000" + "1" + "0" * 96 + ue(0) + "1")
    + _hevc(34, ue(0) + ue(0) + "01")
)


def test_hevc_access_units():
    s = NalStream("hevc", b"", 0)
    idr = _hevc(19, "1" + "0" + ue(0) + "1010")  # first slice, no_output_of_prior_pics, PPS 0
    trail = _hevc(1, "1" + ue(0) + "1010")
    scans = [s.check(HEVC_PS + idr), s.check(trail + _hevc(1, "0" + ue(0) + "1"))]
    assert [(x.key, x.params) for x in scans] == [(True, True), (False, False)]
    for unit, why in [
        (_hevc(1, "1" + ue(0), tid=0), "nuh_temporal_id_plus1 0"),
        (trail + trail, "second picture"),
        (_hevc(45, "1") + trail, "not one an HEVC decoder reads"),
    ]:
        with pytest.raises(BitstreamError, match=why):
            s.check(unit)
    with pytest.raises(BitstreamError, match="names PPS 5"):
        NalStream("hevc", b"", 0).check(HEVC_PS + _hevc(19, "10" + ue(5)))


def test_a_parameter_set_sent_again_reads_as_the_first_time():
    sps1 = nal(b"\x67", "01000010" + "0" * 8 + "00011110" + ue(1) + "1011")
    pps_on_1 = nal(b"\x68", ue(0) + ue(1) + "0110")
    s = NalStream("h264", b"", 0)
    s.check(SPS + sps1 + PPS + IDR)
    s.check(pps_on_1 + P)
    assert s.pps_sps[0] == 1
    s.check(PPS + P)  # PPS 0 on SPS 0 again: read from what was seen, its SPS with it
    assert s.pps_sps[0] == 0
    with pytest.raises(BitstreamError, match="names SPS 1"):
        NalStream("h264", b"", 0).check(SPS + pps_on_1 + IDR)


@pytest.mark.parametrize(
    ("encoder", "fmt", "opts"),
    [
        ("libx264", "h264", {"g": "4", "bf": "0", "x264-params": "slices=4:cabac=0"}),  # Annex B, CAVLC, 4 slices
        ("libx264", "mp4", {"g": "8", "bf": "3", "x264-params": "b-pyramid=normal:weightp=2:slices=3"}),  # avcC
        ("libx265", "hevc", {"g": "6", "x265-params": "bframes=2:keyint=6:slices=2:log-level=error"}),
    ],
)
def test_encoders_streams_pass_and_read_as_the_header_scanner_reads_them(encoder, fmt, opts):
    """x264 / x265 output (slices, B-pyramids, weighted prediction; Annex B and length-prefixed)
    passes every check, each packet read as robodata.codecs.bitstream.Scanner and the muxer read it."""
    rng = np.random.default_rng(40)
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        s = c.add_stream(encoder, rate=10)
        s.width, s.height, s.pix_fmt, s.options = 128, 96, "yuv420p", opts
        for i in range(16):
            img = np.clip(rng.normal(128, 40, (96, 128, 3)) + 4 * i, 0, 255).astype(np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    buf.seek(0)
    with av.open(buf) as c:
        st = c.streams.video[0]
        extradata = bytes(st.codec_context.extradata or b"")
        packets = [(bytes(p), p.is_keyframe) for p in c.demux(st) if p.size]
    codec = {"libx264": "h264", "libx265": "hevc"}[encoder]
    nals, scanner = NalStream(codec, extradata, nal_length_size(codec, extradata)), Scanner(codec, extradata)
    for data, key in packets:
        got, want = nals.check(data), scanner.scan(data)
        assert (got.key, got.ref, got.params, got.open_gop) == (want.key, want.ref, want.params, want.open_gop)
        assert got.key == key
    assert sum(k for _, k in packets) >= 2
    if codec == "h264":  # the PPS's entropy coder, from an avcC record or the in-band parameter sets
        params = extradata or annexb_parameter_sets(codec, packets[0][0])
        assert h264_entropy(params) == ("cavlc" if "cabac=0" in opts["x264-params"] else "cabac")
