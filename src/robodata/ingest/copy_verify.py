"""Verification of a written stream copy, without decoding it whole.

For each copied camera, from the container as written (footer and packet tables, no decode):
the packet count, every pts, the keyframe positions and the bytes of every packet against the
source's; then a decode of `gops` GOPs (first, last, evenly between) proves the stored stream
decodes to frames of the declared size. A camera that fails is named with the reason; the
conversion then transcodes its group and records the finding.
"""

from __future__ import annotations

import numpy as np

from robodata.codecs.video import VideoDecoder
from robodata.container import EpisodeReader
from robodata.ingest.video_copy import CameraCopy

_ALL = (-(1 << 63) + 1, (1 << 63) - 1)


def sample_gops(n: int, k: int) -> list[int]:
    """k GOP indices of n: the first, the last and evenly between (all of them when k >= n)."""
    if k <= 0 or n == 0:
        return []
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, num=min(k, n))})


def verify_copy(path: str, copies: dict[str, CameraCopy], gops: int) -> dict[str, str]:
    """{camera: why its stored stream is not its source's} (empty: every copy verified)."""
    failed: dict[str, str] = {}
    reader = EpisodeReader.open(path)
    try:
        for cam, c in copies.items():
            why = _verify_one(reader, cam, c, gops)
            if why:
                failed[cam] = why
    finally:
        reader.close()
    return failed


def _verify_one(reader: EpisodeReader, cam: str, c: CameraCopy, gops: int) -> str:
    tables = [reader.part_table(ch, p, blob) for ch, p, blob in reader.fetch_parts({cam: _ALL})]
    pts = [int(x) for t in tables for x in t.column("pts").to_pylist()]
    dts = [int(x) for t in tables for x in t.column("dts").to_pylist()]
    key = [bool(x) for t in tables for x in t.column("key").to_pylist()]
    data = [bytes(x) for t in tables for x in t.column("data").to_pylist()]
    if len(pts) != len(c.packets):
        return f"stored {len(pts)} packets, the source has {len(c.packets)}"
    if pts != [p.pts for p in c.packets]:
        return "stored pts differ from the source's"
    if tuple(p for p, k in zip(pts, key, strict=True) if k) != c.keys:
        return "stored keyframe positions differ from the source's"
    bad = next((i for i, (a, p) in enumerate(zip(data, c.packets, strict=True)) if a != p.data), None)
    if bad is not None:
        return f"stored packet {bad} differs from the source's bytes"
    starts = [i for i, k in enumerate(key) if k] + [len(key)]
    shape = reader.meta.streams[cam].shape
    extradata = reader.codec_extradata(cam)
    for g in sample_gops(len(starts) - 1, gops):
        a, b = starts[g], starts[g + 1]
        wanted = set(pts[a:b])
        dec = VideoDecoder(c.codec, extradata, size=(shape[0], shape[1]))
        try:
            got = dec.decode(((pts[i], dts[i], data[i]) for i in range(a, b)), wanted)
        except Exception as exc:  # libavcodec / the size check: the stored stream does not decode
            return f"GOP {g} (packets {a}..{b - 1}) does not decode: {type(exc).__name__}: {exc}"
        if set(got) != wanted:
            return f"GOP {g} (packets {a}..{b - 1}) decoded {len(got)} of {len(wanted)} frames"
        if list(got) != sorted(got):  # the decoder shows pictures in their own order, each with its pts
            return f"GOP {g} (packets {a}..{b - 1}): the decoder shows its pictures in another order than their pts"
    return ""
